"""bench/tools/fetch_realcode.py: a labelled set's files come from their release, checked by sha256, never otherwise.
The index is a folder served through file:// in PyPI's JSON API shape (a listing with relative file URLs, as a mirror
gives them), so the real download, archive reading and hash checks run without a network."""
import hashlib
import io
import json
import os
import sys
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
import fetch_realcode  # noqa: E402

MODEL = b"import torch.nn as nn\n\nclass MLP(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(8, 8)\n"


def sha(data):
    return hashlib.sha256(data).hexdigest()


def wheel(files):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def sdist(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def make_index(tmp_path, package, version, archives):
    """archives: [(filename, packagetype, bytes)] published under files/, listed relative to pypi/PACKAGE/json."""
    root = tmp_path / "index"
    (root / "files").mkdir(parents=True)
    listed = []
    for filename, kind, data in archives:
        (root / "files" / filename).write_bytes(data)
        listed.append({"filename": filename, "packagetype": kind, "url": "../../files/" + filename,
                       "digests": {"sha256": sha(data)}})
    (root / "pypi" / package).mkdir(parents=True)
    (root / "pypi" / package / "json").write_text(json.dumps({"releases": {version: listed}}))
    return root.as_uri()


def sources(tmp_path, rows):
    path = tmp_path / "SOURCES.tsv"
    lines = ["file\trepo\tpath\tversion\tsha256\tlicense"]
    lines += ["\t".join(r) + "\tMIT" for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def fetch(tmp_path, index, rows):
    corpus = tmp_path / "corpus"
    ok, todo = fetch_realcode.fetch_into("t", sources(tmp_path, rows), corpus, tmp_path / "cache", index)
    return ok, todo, corpus


def test_the_file_with_the_recorded_hash_is_written_from_the_wheel(tmp_path):
    index = make_index(tmp_path, "demo", "1.0", [
        ("demo-1.0-py3-none-any.whl", "bdist_wheel", wheel({"demo/mlp.py": MODEL, "demo/other/mlp.py": b"x = 1\n"}))])
    ok, todo, corpus = fetch(tmp_path, index, [("demo_mlp.py", "o/demo", "src/demo/mlp.py", "1.0 (PyPI demo==1.0)", sha(MODEL))])
    assert (ok, todo) == (1, [])
    assert (corpus / "demo_mlp.py").read_bytes() == MODEL


def test_a_text_that_differs_from_the_labelled_one_is_never_written(tmp_path):
    index = make_index(tmp_path, "demo", "1.0", [
        ("demo-1.0-py3-none-any.whl", "bdist_wheel", wheel({"demo/mlp.py": MODEL + b"# changed\n"}))])
    ok, todo, corpus = fetch(tmp_path, index, [("demo_mlp.py", "o/demo", "src/demo/mlp.py", "1.0 (PyPI demo==1.0)", sha(MODEL))])
    assert ok == 0 and not (corpus / "demo_mlp.py").exists()
    assert len(todo) == 1 and "no file src/demo/mlp.py with sha256" in todo[0] and "demo-1.0-py3-none-any.whl" in todo[0]


def test_a_wheel_with_other_line_endings_gives_way_to_the_next_archive(tmp_path):
    # A Windows wheel is listed first and carries CRLF; the Linux wheel after it has the labelled text.
    index = make_index(tmp_path, "vis", "2.0", [
        ("vis-2.0-cp312-cp312-win_amd64.whl", "bdist_wheel", wheel({"vis/m.py": MODEL.replace(b"\n", b"\r\n")})),
        ("vis-2.0-cp312-cp312-manylinux_2_28_x86_64.whl", "bdist_wheel", wheel({"vis/m.py": MODEL}))])
    ok, todo, corpus = fetch(tmp_path, index, [("vis_m.py", "o/vis", "vis/m.py", "2.0 (PyPI vis==2.0)", sha(MODEL))])
    assert (ok, todo) == (1, [])
    assert (corpus / "vis_m.py").read_bytes() == MODEL


def test_a_row_that_says_sdist_reads_the_source_archive(tmp_path):
    index = make_index(tmp_path, "fa", "2.8.3", [
        ("fa-2.8.3-py3-none-any.whl", "bdist_wheel", wheel({"fa/block.py": b"other\n"})),
        ("fa-2.8.3.tar.gz", "sdist", sdist({"fa-2.8.3/fa/block.py": MODEL}))])
    ok, todo, corpus = fetch(tmp_path, index, [("fa_block.py", "o/fa", "fa/block.py", "2.8.3 (PyPI fa==2.8.3, sdist)", sha(MODEL))])
    assert (ok, todo) == (1, [])
    assert (corpus / "fa_block.py").read_bytes() == MODEL


def test_an_archive_that_does_not_match_the_index_hash_is_refused(tmp_path):
    index = make_index(tmp_path, "demo", "1.0", [
        ("demo-1.0-py3-none-any.whl", "bdist_wheel", wheel({"demo/mlp.py": MODEL}))])
    listing = tmp_path / "index" / "pypi" / "demo" / "json"
    doc = json.loads(listing.read_text())
    doc["releases"]["1.0"][0]["digests"]["sha256"] = "0" * 64
    listing.write_text(json.dumps(doc))
    ok, todo, corpus = fetch(tmp_path, index, [("demo_mlp.py", "o/demo", "demo/mlp.py", "1.0 (PyPI demo==1.0)", sha(MODEL))])
    assert ok == 0 and "does not match the index's sha256" in todo[0]
    assert not (corpus / "demo_mlp.py").exists()


def test_rows_pinned_to_a_commit_or_edited_text_are_listed_for_a_hand(tmp_path):
    rows = [("a.py", "o/a", "a/model.py", "fdf63e51dc3089e10d72fd25ac04ffe22f86543e", sha(MODEL)),
            ("b.py", "o/b", "b/model.py", "63d37d79 (text from the b 0.10.0 PyPI package, one edit to match)", sha(MODEL)),
            ("c.py", "o/c", "c/model.py", "1.0 (PyPI c==1.0)", sha(MODEL))]
    ok, todo, corpus = fetch(tmp_path, (tmp_path / "nowhere").as_uri(), rows)
    assert ok == 0 and len(todo) == 3
    assert "read o/a a/model.py at fdf63e51dc3089e10d72fd25ac04ffe22f86543e by hand" in todo[0]
    assert "by hand" in todo[1]
    assert "has no release list for c" in todo[2]


def test_a_file_already_in_place_with_the_right_hash_is_kept_without_the_index(tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "demo_mlp.py").write_bytes(MODEL)
    ok, todo, _ = fetch(tmp_path, (tmp_path / "nowhere").as_uri(),
                        [("demo_mlp.py", "o/demo", "demo/mlp.py", "1.0 (PyPI demo==1.0)", sha(MODEL))])
    assert (ok, todo) == (1, [])


def test_an_unknown_set_name_is_a_clear_message(capsys):
    try:
        fetch_realcode.main(["no-such-set"])
    except SystemExit as e:
        assert "no labelled set 'no-such-set'" in str(e)
    else:
        raise AssertionError("an unknown set must stop with a message")
