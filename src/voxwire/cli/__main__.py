from voxwire.cli import main

main()
