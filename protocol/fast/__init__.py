"""The hot path's one-pass codecs: Produce and Fetch request parsers and their answers' encoders.

``produce`` and ``fetch`` parse the requests producers and consumers send most, checking every
length before anything is sliced (anything unusual returns None: kio decodes it instead);
``answers`` encodes Produce and Fetch answers with the bytes kio's writers write, ``metadata``
Metadata answers (partition arrays shared between topics); ``common`` holds what the parsers
share (request header, varints, strings). No I/O.
"""
