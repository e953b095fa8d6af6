"""Corpus round trip: a failing fuzz run writes an entry, the entry loads and replays, an expected failure that stops
failing flips the strict xfail, a malformed file is one clear error naming the file and the field, and no finding
ever replaces an entry (another run's, or a parallel writer's)."""

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fuzz.run import corpus
from tests.child_pytest import pytest_run

ROOT = Path(__file__).resolve().parents[2]
MUTANT = "flashinfer=tests.mutants:padded_output_not_zeroed"
STANDIN = "flashinfer=fuzz.standins.flashinfer_cpu"


def corpus_run(*args, corpus_dir=None):
    return pytest_run("--hypothesis-profile=ci", f"--gdn-corpus={corpus_dir or ROOT / 'corpus'}", *args, timeout=300)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A fuzz run against a mutant, with --gdn-corpus-out."""
    out = tmp_path_factory.mktemp("corpus")
    run = corpus_run(
        "fuzz/test_decode.py", "-k", "flashinfer-pretranspose", "--gdn-target", MUTANT, "--gdn-corpus-out", str(out)
    )
    assert run.returncode == 1, run.stdout
    assert "new corpus entry" in run.stdout
    return out


def test_failing_run_writes_a_minimal_entry_per_distinct_failure(written):
    """One entry per failure key (kind x dispatch bucket x cause): the planted bug shows in every bucket drawn."""
    entries = [corpus.load(path) for path in sorted(written.glob("*.json"))]
    assert entries
    for entry in entries:
        assert entry.target == "flashinfer-pretranspose-fp32" and entry.expect == "UnwrittenOutput"
        assert entry.case.B == 1 and entry.case.padded == (True,)
        # where it was found: the machine and the library the entry's case failed on
        assert entry.environment["torch"] and entry.environment.get("python"), entry.environment


def test_entry_replays_as_xfail_and_flips_when_fixed(written):
    on_mutant = corpus_run("fuzz/test_corpus.py", "--gdn-target", MUTANT, "-rxX", corpus_dir=written)
    n = len(list(written.glob("*.json")))
    assert on_mutant.returncode == 0 and f"{n} xfailed" in on_mutant.stdout, on_mutant.stdout
    fixed = corpus_run("fuzz/test_corpus.py", "--gdn-target", STANDIN, "-rxX", corpus_dir=written)
    assert fixed.returncode == 1 and "XPASS(strict)" in fixed.stdout, fixed.stdout


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.pop("target"), "missing field 'target'"),
        (lambda d: d.update(case="decode-B1-bogus7"), "field 'case'"),
        (lambda d: d.update(expect="Wrong"), "field 'expect'"),
        (lambda d: d.update(versions="=>1"), "field 'versions'"),
        (lambda d: d.update(schema=99), "field 'schema'"),
        (lambda d: d.update(library="nosuch"), "field 'library' is 'nosuch'"),
        (lambda d: d.update(target="nosuch-fp32"), "field 'target' is 'nosuch-fp32', no known target"),
        (lambda d: d.update(target="fla-recurrent", library="sglang"), "target fla-recurrent is a fla target"),
        (
            lambda d: d.update(
                case="decode-B1-T4-H1-HV1-K8-V16-pool1-fp32state-bf16in-i32-vk-decay_mild-seed0-slots[0]"
            ),
            "field 'case' is not a valid Case coordinate .*decode with T4",
        ),
    ],
)
def test_malformed_entry_names_file_and_field(tmp_path, change, field):
    data = json.loads(next((ROOT / "corpus").glob("*.json")).read_text())
    change(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(corpus.CorpusError, match=f"bad.json: .*{field}"):
        corpus.load(bad)


def test_malformed_entry_stops_the_replay_with_its_name(tmp_path):
    (tmp_path / "broken.json").write_text('{"schema": 1}')
    run = corpus_run("fuzz/test_corpus.py", corpus_dir=tmp_path)
    assert run.returncode != 0 and "broken.json: missing field 'case'" in run.stdout + run.stderr


@pytest.mark.parametrize("make", [lambda p: p / "missing", lambda p: p], ids=["missing", "empty"])
def test_a_corpus_with_nothing_to_replay_is_an_error(tmp_path, make):
    with pytest.raises(corpus.CorpusError, match="no such corpus directory|no corpus entries"):
        corpus.load_all(make(tmp_path))


def test_the_checkout_replays_its_own_corpus():
    assert corpus.default_dir() == ROOT / "corpus" and corpus.load_all()


def test_save_never_overwrites_even_in_parallel(tmp_path):
    entry = corpus.load(next((ROOT / "corpus").glob("*.json")))
    write = lambda description: corpus.save(
        tmp_path, entry.case, entry.target, entry.library, "", entry.expect, description
    )
    first = write("first")
    with ThreadPoolExecutor(8) as pool:
        paths = list(pool.map(write, [f"writer {i}" for i in range(16)]))
    assert len({first, *paths}) == 17 and corpus.load(first).description == "first"
    assert sorted(corpus.load(p).description for p in paths) == sorted(f"writer {i}" for i in range(16))


def test_a_second_run_with_the_same_finding_adds_entries_beside_the_first(written, tmp_path):
    """Two runs, one --gdn-corpus-out: entry names end in a counter, not the seed, so nothing is replaced."""
    out = tmp_path / "corpus"
    shutil.copytree(written, out)
    before = {p.name: p.read_bytes() for p in out.glob("*.json")}
    run = corpus_run(
        "fuzz/test_decode.py", "-k", "flashinfer-pretranspose", "--gdn-target", MUTANT, "--gdn-corpus-out", str(out)
    )
    assert run.returncode == 1, run.stdout
    after = {p.name: p.read_bytes() for p in out.glob("*.json")}
    assert {name: after[name] for name in before} == before
    added = [corpus.load(out / name) for name in set(after) - set(before)]
    assert len(added) == len(before) and all(e.expect == "UnwrittenOutput" for e in added)


# Every FlashInfer release on PyPI from 0.6.5 to 0.7.4 (docs/research/flashinfer-releases.md).
FLASHINFER_RELEASES = (
    "0.6.5 0.6.6 0.6.7 0.6.7.post1 0.6.7.post2 0.6.7.post3 0.6.8 0.6.8.post1 0.6.9 0.6.10 0.6.10.post1 0.6.11 "
    "0.6.11.post1 0.6.11.post2 0.6.11.post3 0.6.12 0.6.13 0.6.14 0.6.15 0.6.15.post1 0.6.16 0.6.16.post1 0.6.16.post2 "
    "0.6.16.post3 0.6.16.post4 0.6.17 0.6.18 0.6.18.post1 0.7.0 0.7.0.post1 0.7.1 0.7.2 0.7.2.post1 0.7.4"
).split()


def test_each_flashinfer_finding_names_its_record_and_stays_inside_it():
    """An entry that replays a known bug names it (`bug`), on the record's path, for releases the record holds for,
    with a case the record's mask keeps from being drawn: the corpus and the masks cannot drift apart."""
    from fuzz.model.known_bugs import BY_ID
    from fuzz.targets import triage
    from fuzz.targets.registry import TARGETS

    paths = {t.name: t.path for t in TARGETS}
    entries = [e for e in corpus.load_all(ROOT / "corpus") if e.library == "flashinfer" and e.expect != "pass"]
    assert entries
    for entry in entries:
        assert entry.bug, f"{entry.path.name}: a FlashInfer finding without its known-bug record"
        record = BY_ID[entry.bug]
        assert paths[entry.target] in record.paths, (entry.path.name, record.paths)
        replayed = [v for v in FLASHINFER_RELEASES if v in entry.versions]
        assert replayed, f"{entry.path.name}: versions {entry.versions} hold for no release"
        outside = [v for v in replayed if not record.holds(paths[entry.target], v)]
        assert not outside, f"{entry.path.name}: {record.id} ({record.releases}) does not hold for {outside}"
        assert triage.masks(record, entry.case) or not record.mask, f"{entry.path.name}: drawn under {record.id}"


def test_a_bug_field_naming_no_record_is_one_clear_error(tmp_path):
    entry = json.loads((ROOT / "corpus" / "flashinfer-bf16-decode-RejectedValidInput-0.json").read_text())
    (tmp_path / "x.json").write_text(json.dumps(dict(entry, bug="no-such-bug")))
    with pytest.raises(corpus.CorpusError, match="field 'bug' is 'no-such-bug', no record"):
        corpus.load(tmp_path / "x.json")
