"""The Python package end to end: a tiny comparison as a data frame, and bad input refused
with the lab's message as ValueError before any work. Run by crates/pynoftl/tests/python.rs
(cargo test) with the repository's .venv, where scripts/install-test-deps.sh builds the
package; or directly: .venv/bin/python -m pytest crates/pynoftl/tests."""

import pytest

import noftl

TINY = dict(workload="tpcb", scale=1, quick=True, repeat=1, duration="200ms",
            stores="native,dftl-2%")


def test_compare_gives_the_cli_json_as_a_frame():
    r = noftl.compare(**TINY)
    assert isinstance(r, dict)
    assert r["workload"] == "tpcb" and r["repeat"] == 1
    frame = r.frame()
    assert list(frame["storage"]) == ["native", "dftl-2%"]
    for column in ("throughput_tps", "stdev", "slowdown", "per_txn.flash_reads",
                   "per_txn.gc_migrations", "consistency.status"):
        assert column in frame.columns, column
    assert (frame["throughput_tps"] > 0).all()


def test_the_same_seed_gives_the_same_result():
    assert noftl.compare(**TINY) == noftl.compare(**TINY)


@pytest.mark.parametrize("call, message", [
    (lambda: noftl.compare(workload="ycsb"), "compare runs --workload tpcb, tatp or tpcc"),
    (lambda: noftl.compare(stores="page"), "must include native"),
    (lambda: noftl.compare(warmup="soon"), "--warmup takes auto"),
    (lambda: noftl.compare(repeat=-1), "repeat takes a whole number"),
    (lambda: noftl.compare(scale="big"), "scale takes a whole number"),
    (lambda: noftl.compare(colour="red"), "unknown argument 'colour'"),
    (lambda: noftl.compare(op="200%"), "op"),
    (lambda: noftl.bench(workload="tpcb"), "give --txns N or --duration D"),
    (lambda: noftl.bench(store="ssd", txns=1), "no store 'ssd'"),
    (lambda: noftl.io(target="ssd"), "unknown target 'ssd'"),
    (lambda: noftl.io(qd=0), "--qd"),
    (lambda: noftl.crashtest(fault="flood"), "flood"),
])
def test_bad_input_raises_value_error_with_the_message(call, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        call()


def test_io_bench_and_crashtest_give_one_row_results():
    r = noftl.io(target="page", ops=2000, bs="4KiB")
    assert r["ops"] == 2000 and len(r.frame()) == 1
    b = noftl.bench(workload="tpcb", accounts_per_branch=1000, txns=50)
    assert b["committed"] == 50
    c = noftl.crashtest(seeds=2)
    assert c["seeds"] == 2 and c["verified"] == 2
