import gzip

import pytest


@pytest.fixture
def write_file(tmp_path):
    """Write text to ``tmp_path / name``, gzipped when the name ends in .gz; returns the path."""

    def write(name: str, text: str):
        path = tmp_path / name
        if name.endswith(".gz"):
            with gzip.open(path, "wt") as fh:
                fh.write(text)
        else:
            path.write_text(text)
        return path

    return write
