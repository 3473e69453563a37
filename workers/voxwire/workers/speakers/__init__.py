"""Who spoke when: speaker embeddings, diarization of files, speaker tracking of streams.

- :mod:`.features`: the 40-channel mel spectrogram the encoder reads;
- :mod:`.encoder`: the GE2E speaker encoder (Resemblyzer's weights, run in numpy);
- :mod:`.clustering`: speakers of a file from its windows' embeddings;
- :mod:`.files`: a file's speaker turns, and the speaker of each transcript segment;
- :mod:`.tracker`: a live stream's speakers, one final at a time (a pure state machine).
"""
