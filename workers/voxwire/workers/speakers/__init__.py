"""Who spoke when: speaker embeddings, diarization of files, speaker tracking of streams.

- :mod:`.segmentation`: pyannote's segmentation-3.0 in numpy, who talks in each
  17 ms of 10 s windows (two at once included);
- :mod:`.features`: the 80-channel filterbank the encoder reads;
- :mod:`.encoder`: the CAM++ speaker encoder (3D-Speaker's weights, run in numpy);
- :mod:`.clustering`: speakers of a file from its voices' embeddings;
- :mod:`.segmented`: a file's speaker turns, from the three above;
- :mod:`.files`: turns, and the speaker of each transcript segment;
- :mod:`.tracker`: a live stream's speakers, one final at a time (a pure state machine);
- :mod:`.live`: a stream's finals through the tracker, split where the voice changes.
"""
