"""The figures README.md, benchmarks/README.md (the site's benchmarks page) and docs/delivery.md
quote, held to the JSON under benchmarks/figures/ each page cites for them.

Every figure checked here names its source:

* a **table** is found on its page by its header row, in the section (between the headings around
  it) that cites its JSON; every row of it is computed again from that JSON (:data:`TABLES`), and the
  table's rows must be exactly those the JSON gives;
* a figure in **prose** is a ``(page, regex of its sentence, JSON, how the JSON gives each number)``
  entry (:data:`PROSE`), checked both ways: the sentence must still be on the page (whitespace
  and line breaks aside), and each number it quotes must be the JSON's as the page rounds it.

A number matches when the JSON's value, formatted with as many decimals as the page writes,
is the number written (thousands separators aside).  So a number changed on the page or in the
JSON fails; prose edited around the sentences does not.  No broker, no Spark: files only.
"""

from __future__ import annotations

import functools
import json
import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
FIGURES = REPO / "benchmarks" / "figures"
README, BENCHMARKS, DELIVERY = "README.md", "benchmarks/README.md", "docs/delivery.md"
OBSERVABILITY_PAGE = "docs/operations/observability.md"

#: a number as the pages write it: digits, thousands separators, decimals (no sign: "7-28" is a range)
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


@functools.cache
def page(name: str) -> str:
    return (REPO / name).read_text(encoding="utf-8")


@functools.cache
def figures(name: str) -> Any:
    return json.loads((FIGURES / name).read_text(encoding="utf-8"))


def shown(value: float, written: str) -> bool:
    """``written`` (as on the page) is ``value`` rounded to the decimals the page writes."""
    digits = written.replace(",", "")
    decimals = len(digits.partition(".")[2])
    return f"{value:.{decimals}f}" == digits


def mismatches(expected: Sequence[float], text: str) -> str | None:
    """Why the numbers of ``text`` are not ``expected`` (None when they are)."""
    written = NUMBER.findall(text)
    if len(written) != len(expected):
        return f"{text!r} holds {len(written)} numbers, the JSON gives {len(expected)}: {list(expected)}"
    wrong = [(w, e) for w, e in zip(written, expected, strict=True) if not shown(e, w)]
    if wrong:
        return f"{text!r}: " + ", ".join(f"{w} written where the JSON gives {e:g}" for w, e in wrong)
    return None


# -- the JSON, read as the pages read it -------------------------------------------------------------------------
def cell_key(config: str, value_size: int, partitions: int) -> tuple[str, str, str]:
    return config, "100 B" if value_size == 100 else "1 KiB", str(partitions)


def best(doc: dict, contender: str, config: str, value_size: int, partitions: int) -> dict:
    """A matrix run's best round of ``contender`` in a cell (its ``results`` entry)."""
    (found,) = [r for r in doc["results"] if r["contender"] == contender and r["config"] == config
                and r["value_size"] == value_size and r["partitions"] == partitions]
    return found


def cells(doc: dict) -> list[tuple[str, int, int]]:
    return [(config, value_size, partitions) for value_size, partitions, config in doc["meta"]["cells"]]


def rate(doc: dict, contender: str, cell: tuple[str, int, int]) -> float:
    return best(doc, contender, *cell)["records_per_s"]


def median_round_ratio(doc: dict, ours: str, other: str, cell: tuple[str, int, int]) -> float:
    """The median of the round-by-round ratios of two contenders in a cell."""
    a, b = best(doc, ours, *cell)["rounds"], best(doc, other, *cell)["rounds"]
    return statistics.median(x["records_per_s"] / y["records_per_s"] for x, y in zip(a, b, strict=True))


def ratio(doc: dict, ours: str, other: str, cell: tuple[str, int, int]) -> float:
    return rate(doc, ours, cell) / rate(doc, other, cell)


def cost(doc: dict, pair: str, cell: tuple[str, int, int]) -> dict:
    """A cost pair's entry for a cell (the JSON's ``costs`` name no configuration: the
    contender's best rate says which cell it is)."""
    entry = best(doc, doc_pair_contender(doc, pair), *cell)
    (found,) = [c for c in doc["costs"] if c["pair"] == pair and c["contender_rows_per_s"] == entry["records_per_s"]]
    return found


def doc_pair_contender(doc: dict, pair: str) -> str:
    return next(c["contender"] for c in doc["costs"] if c["pair"] == pair)


def span(values: Iterable[float]) -> tuple[float, float]:
    values = list(values)
    return min(values), max(values)


MATRIX = "matrix-apache-4.4.json"
ORDER = "order-effects-apache-4.4.json"
OURS, JVM, MIA = "spark-pyprod", "spark-jvm-kafka", "spark-mapinarrow-confluent"


# -- tables -------------------------------------------------------------------------------------------------------
Row = list[list[float] | None]  # per column after the key: the numbers it must hold (None: not checked)


@dataclass(frozen=True)
class Table:
    page: str
    #: the table's header row as the page writes it
    header: str
    #: the JSON under benchmarks/figures/ that the page cites for it
    source: str
    #: how many of the first cells name the row
    key_cells: int
    #: ``{key: row}`` from the JSON and the table's header cells
    rows: Callable[[Any, list[str]], dict[tuple[str, ...], Row]]

    @property
    def id(self) -> str:
        return f"{self.page}: {self.source}: {self.header[:50]}"


def split(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def plain(text: str) -> str:
    """A key cell without its emphasis or code marks."""
    return text.replace("**", "").replace("`", "").strip("* ")


def find_table(table: Table) -> list[list[str]]:
    """The rows (cells) of ``table`` on its page: the one whose section (from the heading above it
    to the next) cites its JSON."""
    lines = page(table.page).splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == table.header]
    assert starts, f"{table.page} no longer has the table {table.header!r}"
    fenced, headings = False, [0]
    for i, line in enumerate(lines):
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("#"):
            headings.append(i)
    for start in starts:
        above = max(h for h in headings if h < start)
        below = min([h for h in headings if h > start] + [len(lines)])
        if table.source in "\n".join(lines[above:below]):
            break
    else:
        pytest.fail(f"{table.page}: the table {table.header!r} no longer cites {table.source} in its section")
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(split(line))
    return rows


def matrix_readme(doc: dict, header: list[str]) -> dict:
    return {cell_key(*c): [[rate(doc, OURS, c)], [rate(doc, JVM, c)], [ratio(doc, OURS, JVM, c)],
                           [rate(doc, MIA, c)], [ratio(doc, OURS, MIA, c)]] for c in cells(doc)}


def matrix_benchmarks(doc: dict, header: list[str]) -> dict:
    return {cell_key(*c): [[rate(doc, OURS, c)], [rate(doc, JVM, c)], [rate(doc, MIA, c)],
                           [ratio(doc, OURS, JVM, c), median_round_ratio(doc, OURS, JVM, c)],
                           [ratio(doc, OURS, MIA, c), median_round_ratio(doc, OURS, MIA, c)],
                           [best(doc, OURS, *c)["broker_cpu_s_per_m"], best(doc, JVM, *c)["broker_cpu_s_per_m"]]]
            for c in cells(doc)}


def sink_cpu_per_gb(run: dict, where: str) -> float | None:
    """The CPU seconds per GB of keys (10 B) and values of the process a sink ran in."""
    spent = (run.get("cpu_split_s") or {}).get(where)
    return spent / (run["records"] * (10 + run["value_size"]) / 1e9) if spent else None


def matrix_cpu(doc: dict, header: list[str]) -> dict:
    """ours ÷ JVM rows/s (median of the round ratios), each sink's CPU per GB, ours ÷ JVM's CPU."""
    rows = {}
    for c in cells(doc):
        ours, jvm = sink_cpu_per_gb(best(doc, OURS, *c), "python_workers"), sink_cpu_per_gb(best(doc, JVM, *c), "spark_jvm")
        mia = sink_cpu_per_gb(best(doc, MIA, *c), "python_workers")
        rows[cell_key(*c)] = [[ratio(doc, OURS, JVM, c), median_round_ratio(doc, OURS, JVM, c)], [ours], [jvm],
                              None if mia is None else [mia], [ours / jvm]]
    return rows


def per_stage_work(doc: dict, header: list[str]) -> dict:
    """before → after: best rounds, their ratio (median of the round ratios), the workers' CPU of
    the round that spent less, the median records per batch the broker stored in the best round."""
    before, after = doc["before"], doc["after"]

    def lower_cpu(side: dict, c: tuple[str, int, int]) -> float:
        return min(r["cpu_split_s"]["python_workers"] for r in side["runs"] if r["contender"] == OURS
                   and (r["config"], r["value_size"], r["partitions"]) == c)

    def batches(side: dict, c: tuple[str, int, int]) -> float:
        return best(side, OURS, *c)["stored_batches"]["records_per_batch"]["p50"]

    return {cell_key(*c): [[rate(before, OURS, c), rate(after, OURS, c)], [rate(before, JVM, c), rate(after, JVM, c)],
                           [ratio(before, OURS, JVM, c), median_round_ratio(before, OURS, JVM, c),
                            ratio(after, OURS, JVM, c), median_round_ratio(after, OURS, JVM, c)],
                           [lower_cpu(before, c), lower_cpu(after, c)], [batches(before, c), batches(after, c)]]
            for c in cells(after)}


AVRO, JVM_AVRO, CONFLUENT_AVRO = "spark-pyprod-avro", "spark-jvm-avro", "spark-confluent-avro"
PROTOBUF, CONFLUENT_PROTOBUF = "spark-pyprod-protobuf", "spark-confluent-protobuf"


def avro_matrix(doc: dict, header: list[str]) -> dict:
    return {cell_key(*c): [[rate(doc, AVRO, c)], [rate(doc, JVM_AVRO, c)], [rate(doc, CONFLUENT_AVRO, c)],
                           [ratio(doc, AVRO, JVM_AVRO, c), median_round_ratio(doc, AVRO, JVM_AVRO, c)],
                           [ratio(doc, AVRO, CONFLUENT_AVRO, c)], [cost(doc, "avro", c)["ratio"]]]
            for c in cells(doc)}


def protobuf_matrix(doc: dict, header: list[str]) -> dict:
    rows = {}
    for c in cells(doc):
        config, value, partitions = cell_key(*c)
        protobuf, avro = cost(doc, "protobuf", c), cost(doc, "avro-beside-protobuf", c)
        rows[(config, f"{value}, {partitions}")] = [
            [rate(doc, PROTOBUF, c)], [rate(doc, CONFLUENT_PROTOBUF, c)],
            [ratio(doc, PROTOBUF, CONFLUENT_PROTOBUF, c), median_round_ratio(doc, PROTOBUF, CONFLUENT_PROTOBUF, c)],
            [protobuf["ratio"], protobuf["median_round_ratio"]], [avro["ratio"], avro["median_round_ratio"]]]
    return rows


def pyspark_lines(doc: dict, header: list[str]) -> dict:
    rows = {}
    for mode in ("batch", "stream"):
        newest = statistics.median(doc[f"4.3.0 {mode}"])
        for line in ("4.3.0", "4.0.0"):
            median = statistics.median(doc[f"{line} {mode}"])
            rows[(mode, line)] = [[median], [doc["rows"] / median], [newest / median]]
    return rows


def profile(doc: dict, header: list[str]) -> dict:
    """A stage-by-cell table: its columns are the JSON's cells, in the header's order."""
    by_label = {f"{r['cell']['value_size']} B, {r['cell']['partitions']} p, {r['cell']['config']}": r
                for r in doc["results"]}
    columns = [by_label[label] for label in header[1:]]
    labels = {stage for r in doc["results"] for stage in r["stages_s_per_gb"]}
    rows: dict[tuple[str, ...], Row] = {(stage,): [[r["stages_s_per_gb"].get(stage, 0.0)] for r in columns]
                                        for stage in labels}
    rows[("all",)] = [[r["cpu_s_per_gb"]] for r in columns]
    for name in columns[0]["unavoidable_s_per_gb"]:
        rows[(f"unavoidable: {name}",)] = [[r["unavoidable_s_per_gb"][name]] for r in columns]
    return rows


def release_pairs(doc: dict, header: list[str]) -> dict:
    """0.2.0 against 0.1.0: per alternation the ratio of the best rounds, after over before, and
    their median."""
    def best_rate(runs: list[dict], contender: str, value: int, partitions: int) -> float:
        return max(r["records_per_s"] for r in runs if r["contender"] == contender and r["value_size"] == value
                   and r["partitions"] == partitions and r["status"] == "ok")

    rows = {}
    for label, contender in (("Spark sink", OURS), ("send_batch alone", "ours-batch")):
        row: Row = []
        for value, partitions in ((100, 4), (100, 64), (1024, 4), (1024, 64)):
            ratios = [best_rate(doc["runs"][f"after{i}"]["runs"], contender, value, partitions)
                      / best_rate(doc["runs"][f"before{i}"]["runs"], contender, value, partitions) for i in (1, 2, 3)]
            row.append([*ratios, statistics.median(ratios)])
        rows[(label,)] = row
    return rows


def declared_once(doc: dict, header: list[str]) -> dict:
    rows = {}
    for label, contender in (("Spark sink", OURS), ("send_batch alone", "ours-batch")):
        row: Row = []
        for value, partitions in ((100, 4), (100, 64), (1024, 4), (1024, 64)):
            ratios = doc["summary"][str((contender, value, partitions))]["pair_ratios"]
            row.append([*ratios, statistics.median(ratios)])
        rows[(label,)] = row
    return rows


def typed_settings(doc: dict, header: list[str]) -> dict:
    """Each cell's pairs of neighbouring runs (before, after): records/s, their ratio (and its
    median), and each run's CPU besides the broker's."""
    def cell(run: dict, value: int, codec: str) -> dict:
        (found,) = [c for c in run["cells"] if c["value_size"] == value and c["compression"] == codec]
        return found

    def pairs(value: int, codec: str) -> list[tuple[dict, dict]]:
        a = [r for r in doc["runs"] if r["series"] == "A"]
        b = [r for r in doc["runs"] if r["series"] == "B"]
        found = [(a[1], a[0]), (a[3], a[2])]
        return found + ([(b[0], b[1]), (b[3], b[2]), (b[4], b[5])] if (value, codec) == (1024, "none") else [])

    rows = {}
    for label, value, codec in (("100 B, none", 100, "none"), ("100 B, lz4", 100, "lz4"),
                                ("1 KiB, none", 1024, "none"), ("1 KiB, lz4", 1024, "lz4")):
        both = pairs(value, codec)
        rate = [[cell(run, value, codec)["records_per_s"] / 1000 for run in side] for side in zip(*both, strict=True)]  # (k)
        ratios = [after / before for before, after in zip(*rate, strict=True)]
        rest = [[cell(run, value, codec)["cpu_machine_s"] - cell(run, value, codec)["cpu_broker_s"] for run in side]
                for side in zip(*both, strict=True)]
        rows[(label,)] = [rate[0], rate[1], [*ratios, statistics.median(ratios)], rest[0], rest[1]]
    return rows


def row_walk(doc: dict, header: list[str]) -> dict:
    """Each cell's pairs of neighbouring runs (``doc["pairs"]``: before, after): records/s, their
    ratio (and its median), and each run's CPU besides the broker's."""
    def cell(series: str, side: str, order: int, value: int, codec: str) -> dict:
        (run,) = [r for r in doc["runs"] if (r["series"], r["side"], r["order"]) == (series, side, order)]
        (found,) = [c for c in run["cells"] if c["value_size"] == value and c["compression"] == codec]
        return found

    rows = {}
    for label, series, value, codec in (("Spark, 100 B, none", "A", 100, "none"), ("Spark, 100 B, lz4", "A", 100, "lz4"),
                                        ("Spark, 1 KiB, none", "AB", 1024, "none"),
                                        ("Spark, 1 KiB, lz4", "AB", 1024, "lz4"),
                                        ("send_batch alone, 1 KiB, none", "C", 1024, "none"),
                                        ("send_batch alone, 1 KiB, lz4", "C", 1024, "lz4")):
        pairs = [p for p in doc["pairs"] if p["series"] in series]
        sides = [[cell(p["series"], side, p[side], value, codec) for p in pairs] for side in ("before", "after")]
        rate = [[c["records_per_s"] / 1000 for c in side] for side in sides]  # (k)
        ratios = [after / before for before, after in zip(*rate, strict=True)]
        rest = [[c["cpu_machine_s"] - c["cpu_broker_s"] for c in side] for side in sides]
        rows[(label,)] = [rate[0], rate[1], [*ratios, statistics.median(ratios)], rest[0], rest[1]]
    return rows


OBSERVABILITY = "observability-cost-apache-4.4.json"
#: its comparisons: (the table's label as read, series, base side, other side)
OBSERVABILITY_ROWS = (("Spark, OpenTelemetry absent: 3230e77 ÷ 91ff028", "D", "before", "after"),
                      ("Spark, the same code against itself: 91ff028 ÷ 91ff028", "G", "before", "after"),
                      ("send_batch alone, OpenTelemetry absent: 3230e77 ÷ 91ff028", "F", "before", "after"),
                      ("Spark: an SDK set up ÷ the [otel] extra alone", "E", "api", "sdk"),
                      ("Spark: traceHeaders=task ÷ an SDK set up", "E", "sdk", "task"))


def observability_runs(doc: dict, series: str, base: str, other: str) -> list[tuple[dict, dict]]:
    """The (base, other) runs of a comparison's pairs."""
    def run(order: int) -> dict:
        (found,) = [r for r in doc["runs"] if (r["series"], r["order"]) == (series, order)]
        return found
    return [(run(p["base"]), run(p["other"])) for p in doc["pairs"]
            if (p["series"], p["base_side"], p["other_side"]) == (series, base, other)]


def cpu_us_per_row(doc: dict, run: dict) -> float:
    """The Python workers' CPU (send_batch alone: the producer's process's) per row, µs."""
    return run.get("cpu_python_workers_s", run.get("cpu_producer_process_s", 0.0)) / doc["rows"] * 1e6


def observability_cost(doc: dict, header: list[str]) -> dict:
    """Each comparison: its pairs; records/s, other ÷ base per pair (median, lowest, highest); the
    median CPU per row of each side; the CPU per pair, other ÷ base (median, lowest, highest); and
    Spark's JVM's CPU, other ÷ base (median; None without Spark)."""
    def spread(values: list[float]) -> list[float]:
        return [statistics.median(values), min(values), max(values)]

    rows = {}
    for label, series, base, other in OBSERVABILITY_ROWS:
        pairs = observability_runs(doc, series, base, other)
        cpu = [(cpu_us_per_row(doc, b), cpu_us_per_row(doc, o)) for b, o in pairs]
        jvm = [o["cpu_spark_jvm_s"] / b["cpu_spark_jvm_s"] for b, o in pairs if "cpu_spark_jvm_s" in b]
        rows[(label,)] = [[len(pairs)], spread([o["records_per_s"] / b["records_per_s"] for b, o in pairs]),
                          [statistics.median(c[0] for c in cpu), statistics.median(c[1] for c in cpu)],
                          spread([o / b for b, o in cpu]), [statistics.median(jvm)] if jvm else None]
    return rows


def observability_bytes(doc: dict, side: str) -> float:
    """Bytes the broker took in per record (series E's ``side``), the median of its runs."""
    return statistics.median(r["bytes_in"] / doc["rows"] for r in doc["runs"] if (r["series"], r["side"]) == ("E", side))


def decision_in_kafka(doc: dict, header: list[str]) -> dict:
    """The exactly-once write's best records/s per alternation, before and after, and their ratio."""
    def eos(side: str, alternation: int, codec: str) -> float:
        (run,) = [r for r in doc["runs"] if r["side"].startswith(side) and r["alternation"] == alternation]
        (cell,) = [c for c in run["cells"] if c["contender"] == "spark-pyprod-eos" and c["compression"] == codec]
        return cell["records_per_s"]

    return {(codec,): [[eos("before", 1, codec), eos("before", 2, codec)], [eos("after", 1, codec), eos("after", 2, codec)],
                       [eos("after", i, codec) / eos("before", i, codec) for i in (1, 2)]]
            for codec in ("none", "lz4")}


def encoder_paths(doc: dict, header: list[str]) -> dict:
    """The encoder's three paths, CPU s per GB of values: copy / views / pieces per value size and
    partitions."""
    sizes = {"64 B": 64, "256 B": 256, "512 B": 512, "1 KiB": 1024, "4 KiB": 4096}
    partitions = [int(h.split()[0]) for h in header[1:]]
    by = {(c["value_bytes"], c["partitions"]): c for c in doc["cells"]}
    return {(label,): [[by[size, p][f"{path}_cpu_s_per_gb"] for path in ("copy", "views", "pieces")]
                       for p in partitions]
            for label, size in sizes.items()}


#: exactly_once_cost's idle driver had written under four prefixes: its warm-up write's, the two
#: measured batch writes' and the streaming query's (benchmarks/exactly_once_cost.py)
COST_RUN_PREFIXES = 4


def requests_by_type(doc: dict, header: list[str]) -> dict:
    """docs/delivery.md's table: requests per batch write, per micro-batch and per idle second."""
    columns = [(doc["batch"][0]["requests"], 1), (doc["batch"][1]["requests"], 1),
               (doc["streaming"]["requests"], doc["streaming"]["micro_batches"]),
               (doc["idle_driver"][0]["requests"], doc["idle_driver"][0]["seconds"]),
               (doc["idle_driver"][1]["requests"], doc["idle_driver"][1]["seconds"])]
    names = {"InitProducerId": ["InitProducerId"], "EndTxn": ["EndTxn"], "AddPartitionsToTxn": ["AddPartitionsToTxn"],
             "FindCoordinator": ["FindCoordinator"], "DescribeTransactions": ["DescribeTransactions"],
             "ListTransactions (one per broker)": ["ListTransactions"], "Produce": ["Produce"],
             "Fetch, ListOffsets": ["Fetch", "ListOffsets"], "Metadata": ["Metadata"]}
    rows = {}
    for label, types in names.items():
        row: Row = []
        for requests, per in columns:
            values = [requests.get(t, 0) / per for t in types]
            row.append(values if any(values) else [0])
        rows[(label,)] = row
    idle = doc["idle_driver"][0]
    rows[("InitProducerId",)][3] = [idle["requests"]["InitProducerId"] / idle["seconds"],
                                    idle["requests"]["InitProducerId"] / idle["seconds"] / COST_RUN_PREFIXES]
    return rows


TABLES = [
    Table(README, "| config | value | partitions | `pyprod-kafka` | Spark's JVM sink | ours ÷ JVM | `mapInArrow` + "
                  "confluent-kafka | ours ÷ mapInArrow |", MATRIX, 3, matrix_readme),
    Table(BENCHMARKS, "| config | value | partitions | ours rows/s | Spark JVM sink | mapInArrow + confluent | ours ÷ JVM "
                      "| ours ÷ mapInArrow | broker CPU s / M rows, ours / JVM |", MATRIX, 3, matrix_benchmarks),
    Table(BENCHMARKS, "| config | value | partitions | ours rows/s | JVM sink rows/s | ours ÷ JVM | ours' workers, CPU s "
                      "(the lower round) | ours' batches (median records) |", "before-after-per-stage-work.json", 3,
          per_stage_work),
    Table(BENCHMARKS, "| contender | 100 B, 4 | 100 B, 64 | 1 KiB, 4 | 1 KiB, 64 |", "before-after-0.2.0.json", 1,
          release_pairs),
    Table(BENCHMARKS, "| contender | 100 B, 4 | 100 B, 64 | 1 KiB, 4 | 1 KiB, 64 |", "before-after-declared-once.json",
          1, declared_once),
    Table(BENCHMARKS, "| config | value | partitions | ours (Avro) | to_avro + JVM sink | mapInArrow + AvroSerializer | "
                      "ours ÷ JVM | ours ÷ AvroSerializer | Avro ÷ pre-encoded (ours) |", "avro-matrix-apache-4.4.json",
          3, avro_matrix),
    Table(BENCHMARKS, "| config | value, partitions | ours rows/s | mapInArrow+`ProtobufSerializer` rows/s | ours ÷ it | "
                      "Protobuf's cost (ours ÷ pre-encoded) | Avro's cost, same run |", "protobuf-matrix-apache-4.4.json",
          2, protobuf_matrix),
    Table(BENCHMARKS, "| cell | before | after | after ÷ before, per pair | CPU s but the broker's, before | after |",
          "before-after-typed-settings.json", 1, typed_settings),
    Table(BENCHMARKS, "| cell | before | after | after ÷ before, per pair | CPU s but the broker's, before | after |",
          "before-after-row-walk.json", 1, row_walk),
    Table(BENCHMARKS, "| comparison | pairs | records/s, other ÷ base: median (lowest–highest) | our CPU µs per row, "
                      "base → other (medians) | our CPU, other ÷ base: median (lowest–highest) | Spark JVM's CPU, other "
                      "÷ base: median |", OBSERVABILITY, 1, observability_cost),
    Table(BENCHMARKS, "| codec | before | after | after ÷ before, per alternation |",
          "before-after-decision-in-kafka.json", 1, decision_in_kafka),
    Table(BENCHMARKS, "| mode | pyspark | median s | rows/s | ratio to 4.3 |", "pyspark-lines-4.0-4.3.json", 2,
          pyspark_lines),
    Table(BENCHMARKS, "| stage (CPU s per GB) | 1024 B, 4 p, tuned | 1024 B, 4 p, defaults | 1024 B, 64 p, tuned | "
                      "1024 B, 64 p, defaults | 100 B, 4 p, tuned | 100 B, 4 p, defaults | 100 B, 64 p, tuned | "
                      "100 B, 64 p, defaults |", "producer-profile-apache-4.4.json", 1, profile),
    Table(BENCHMARKS, "| stage (CPU s per GB) | 100 B, 4 p, defaults | 100 B, 64 p, defaults | 100 B, 256 p, defaults | "
                      "1024 B, 4 p, defaults | 1024 B, 64 p, defaults | 1024 B, 256 p, defaults | 100 B, 4 p, tuned | "
                      "100 B, 64 p, tuned | 100 B, 256 p, tuned | 1024 B, 4 p, tuned | 1024 B, 64 p, tuned | "
                      "1024 B, 256 p, tuned |", "spark-worker-profile-apache-4.4.json", 1, profile),
    Table(BENCHMARKS, "| config | value | partitions | ours ÷ JVM, rows/s | ours' workers, CPU s/GB | JVM sink's JVM, "
                      "CPU s/GB | mapInArrow + confluent's workers, CPU s/GB | ours ÷ JVM, CPU |",
          "matrix-apache-4.4-one-copy.json", 3, matrix_cpu),
    Table(BENCHMARKS, "| config | value | partitions | ours ÷ JVM, rows/s | ours' workers, CPU s/GB | JVM sink's JVM, "
                      "CPU s/GB | mapInArrow + confluent's workers, CPU s/GB | ours ÷ JVM, CPU |",
          "matrix-apache-4.4-small-indexes.json", 3, matrix_cpu),
    Table(BENCHMARKS, "| value | 4 partitions copy / views / pieces | 64 | 256 |", "encoder-paths.json", 1, encoder_paths),
    Table(DELIVERY, "| request | batch write, 2 tasks | batch write, 8 tasks | per micro-batch (2 tasks) | idle driver, per "
                    "s, 0–40 s after | idle driver, per s, 80–110 s after |", "exactly-once-cost-apache-4.4.json", 1,
          requests_by_type),
]


def row_key(cells_: list[str], n: int) -> tuple[str, ...]:
    key = tuple(plain(c) for c in cells_[:n])
    if key and key[0].startswith("all ("):  # the profiles' total row: "all (getrusage)", "all (the workers' CPU...)"
        return ("all",)
    return key


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.id)
def test_a_table_holds_what_its_json_gives(table: Table):
    rows = find_table(table)
    header = split(table.header)
    expected = table.rows(figures(table.source), header)
    found = {row_key(r, table.key_cells): r[table.key_cells:] for r in rows}
    assert set(found) == set(expected), (f"{table.page}: the rows of {table.header[:60]!r} are not those of "
                                          f"{table.source}: {sorted(set(found) ^ set(expected))}")
    wrong = []
    for key, cells_ in found.items():
        assert len(cells_) == len(expected[key]), f"{key}: {len(cells_)} cells, {len(expected[key])} expected"
        for column, (text, numbers) in enumerate(zip(cells_, expected[key], strict=True)):
            why = None if numbers is None else mismatches(numbers, text)
            if why:
                wrong.append(f"{key} {header[table.key_cells + column]!r}: {why}")
    assert not wrong, f"{table.page} against {table.source}:\n" + "\n".join(wrong)


# -- prose ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Prose:
    page: str
    #: the sentence, its numbers as groups (matched against the page with its whitespace collapsed)
    pattern: str
    source: str
    #: the numbers of the groups, in order, from the JSON
    values: Callable[[Any], Sequence[float]]

    @property
    def id(self) -> str:
        return f"{self.page}: {self.pattern[:60]}"


N = r"(\d[\d,]*(?:\.\d+)?)"  # one number, as written


def defaults_vs_jvm(doc: dict) -> tuple[float, float]:
    return span(ratio(doc, OURS, JVM, c) for c in cells(doc) if c[0] == "defaults")


def tuned_vs_jvm(doc: dict, value: int, partitions: Iterable[int]) -> tuple[float, float]:
    return span(ratio(doc, OURS, JVM, c) for c in cells(doc) if c[0] == "tuned" and c[1] == value and c[2] in partitions)


def peak_rss(doc: dict, config: str | None = None) -> list[float]:
    return [r["peak_rss_mb"] for r in doc["runs"] if r["contender"] == OURS and r["status"] == "ok"
            and (config is None or r["config"] == config)]


def avro_ratios(doc: dict, other: str, config: str | None = None) -> tuple[float, float]:
    return span(ratio(doc, AVRO, other, c) for c in cells(doc) if config is None or c[0] == config)


def format_costs(doc: dict, value: int, pairs: Sequence[str] = ("protobuf", "avro-beside-protobuf")) -> tuple[float, float]:
    """The span of the cost pairs' ratios (best rounds) at a value size."""
    return span(cost(doc, pair, c)["ratio"] for pair in pairs for c in cells(doc) if c[1] == value)


def workers_cpu(doc: dict, contender: str) -> tuple[float, float]:
    """The Python workers' CPU seconds of a contender, over every round of every cell."""
    return span(r["cpu_split_s"]["python_workers"] for r in doc["runs"] if r["contender"] == contender)


def profile_cell(doc: dict, value: int, partitions: int, config: str) -> dict:
    (found,) = [r for r in doc["results"] if r["cell"] == {"value_size": value, "partitions": partitions,
                                                           "config": config}]
    return found


def cpu_drop(doc: dict, cell: tuple[str, int, int]) -> float:
    """How much less CPU (%) the lower round of ours' workers spent after than before."""
    def lower(side: dict) -> float:
        return min(r["cpu_split_s"]["python_workers"] for r in side["runs"] if r["contender"] == OURS
                   and (r["config"], r["value_size"], r["partitions"]) == cell)
    return 100 * (1 - lower(doc["after"]) / lower(doc["before"]))


KIB = [(cfg, 1024, p) for cfg in ("defaults", "tuned") for p in (4, 64, 256)]
COST = "exactly-once-cost-apache-4.4.json"
EOS_COST = "eos-cost-apache-4.4.json"
EOS_TASKS = "eos-commit-1000-tasks-apache-4.4.json"


def fixed_init_producer_ids(doc: dict) -> tuple[float, float]:
    """InitProducerId a batch write sends beyond one per task (its fixed part)."""
    return span(b["requests"]["InitProducerId"] - b["tasks"] for b in doc["batch"])


def eos_rounds(doc: dict) -> list[float]:
    return [r for c in doc["costs"] if c["pair"] == "exactly-once" for r in c["round_ratios"]]


def eos_phase(doc: dict, contender: str, phase: str) -> float:
    """The median over every round of a contender of one phase's seconds (before the tasks, the
    tasks, after them)."""
    return statistics.median(r[f"{phase}_s"] for r in doc["runs"] if r["contender"] == contender and r["status"] == "ok")


def commit_seconds(doc: dict) -> float:
    """The exactly-once write's time after its tasks beyond the at-least-once write's (medians of
    the rounds): the driver's commit of its tasks' transactions."""
    return eos_phase(doc, "spark-pyprod-eos", "after_tasks") - eos_phase(doc, OURS, "after_tasks")


def order_runs(doc: dict, group: str, contender: str, round_: int) -> dict:
    """One round of one contender in a group of ``order-effects-apache-4.4.json``."""
    return next(r for run in doc["groups"][group]["benchmark_runs"] for r in run["runs"]
                if r["contender"] == contender and r["round"] == round_)


PROSE = [
    Prose(README, rf"with each client's defaults {N}–{N}× as fast as Spark's JVM sink", MATRIX, defaults_vs_jvm),
    Prose(README, rf"Peak RSS per worker measured in the benchmarks, over every round of the Spark matrix: {N}–{N} MB "
                  rf"\({N}–{N} MB with the defaults; {N}–{N} MB tuned", MATRIX,
          lambda d: [*span(peak_rss(d)), *span(peak_rss(d, "defaults")), *span(peak_rss(d, "tuned"))]),
    Prose(README, rf"the same runs' way: {N}–{N}× Spark's JVM path to the same bytes \(`to_avro` and `format\(\"kafka\"\)`\) "
                  rf"with each client's defaults", "avro-matrix-apache-4.4.json",
          lambda d: avro_ratios(d, JVM_AVRO, "defaults")),
    Prose(README, rf"and {N}–{N}× `mapInArrow` with confluent-kafka's `AvroSerializer`", "avro-matrix-apache-4.4.json",
          lambda d: avro_ratios(d, CONFLUENT_AVRO)),
    Prose(README, rf"Protobuf through a Schema Registry \(`valueFormat=protobuf`\): {N}–{N}× `mapInArrow` with "
                  rf"confluent-kafka's `ProtobufSerializer`", "protobuf-matrix-apache-4.4.json",
          lambda d: span(ratio(d, PROTOBUF, CONFLUENT_PROTOBUF, c) for c in cells(d))),
    Prose(README, rf"the driver's commit of a 1,000-task write took {N} s more than an at-least-once write's",
          EOS_TASKS, lambda d: [commit_seconds(d)]),
    Prose(BENCHMARKS, rf"ours first then the JVM sink, {N} against {N} rows/s \({N}×\); the JVM sink first then ours, "
                      rf"{N} against {N} \({N}×\)", ORDER,
          lambda d: [(a := order_runs(d, "ours-then-jvm", OURS, 2)["records_per_s"]),
                     (b := order_runs(d, "ours-then-jvm", JVM, 2)["records_per_s"]), a / b,
                     (c := order_runs(d, "jvm-then-ours", JVM, 2)["records_per_s"]),
                     (e := order_runs(d, "jvm-then-ours", OURS, 2)["records_per_s"]), e / c]),
    Prose(BENCHMARKS, rf"with Kafka's 10 MiB indexes {N} s and {N} s in the first round \(ours, then the JVM sink's own "
                      rf"run\), {N} and {N} s in the second; with 1 MiB indexes {N} and {N} s, then {N} and {N} s", ORDER,
          lambda d: [order_runs(d, g, c, r)["cpu_broker_s"] for g in ("indexes-10MiB", "indexes-1MiB")
                     for r in (1, 2) for c in (OURS, JVM)]),
    Prose(BENCHMARKS, rf"With each client's defaults ours writes {N}–{N}× Spark's JVM sink", MATRIX, defaults_vs_jvm),
    Prose(BENCHMARKS, rf"Tuned alike, {N}–{N}× at 100 B and {N}–{N}× at 1 KiB with 4 and 64 partitions", MATRIX,
          lambda d: [*tuned_vs_jvm(d, 100, (4, 64, 256)), *tuned_vs_jvm(d, 1024, (4, 64))]),
    Prose(BENCHMARKS, rf"but {N}× at 1 KiB and 256 partitions, where ours' batches came out at a median of {N} records",
          MATRIX, lambda d: [ratio(d, OURS, JVM, ("tuned", 1024, 256)),
                             best(d, OURS, "tuned", 1024, 256)["stored_batches"]["records_per_batch"]["p50"]]),
    Prose(BENCHMARKS, rf"Ours' workers' lower round spent less CPU in every 1 KiB cell \({N}-{N} % less, {N} % at 256 "
                      rf"partitions tuned\)", "before-after-per-stage-work.json",
          lambda d: [*span(cpu_drop(d, c) for c in KIB), cpu_drop(d, ("tuned", 1024, 256))]),
    Prose(BENCHMARKS, rf"1 KiB and 256 partitions with the defaults: {N} s before, {N} s after",
          "before-after-per-stage-work.json",
          lambda d: [best(d[side], OURS, "defaults", 1024, 256)["cpu_split_s"]["python_workers"]
                     for side in ("before", "after")]),
    Prose(BENCHMARKS, rf"The 1 KiB, 256-partition tuned cell went from {N}× the JVM sink to \*\*{N}×\*\*, its batches "
                      rf"from {N} to {N} records", "before-after-per-stage-work.json",
          lambda d: [ratio(d["before"], OURS, JVM, ("tuned", 1024, 256)), ratio(d["after"], OURS, JVM, ("tuned", 1024, 256)),
                     *(best(d[s], OURS, "tuned", 1024, 256)["stored_batches"]["records_per_batch"]["p50"]
                       for s in ("before", "after"))]),
    Prose(BENCHMARKS, rf"Against what PySpark users write today \(`AvroSerializer` per row in Python\) ours is {N}–{N}× "
                      rf"faster", "avro-matrix-apache-4.4.json", lambda d: avro_ratios(d, CONFLUENT_AVRO)),
    Prose(BENCHMARKS, rf"Against Spark's JVM path to the same bytes ours is {N}–{N}× with each client's defaults and "
                      rf"level \({N}–{N}×", "avro-matrix-apache-4.4.json",
          lambda d: [*avro_ratios(d, JVM_AVRO, "defaults"), *avro_ratios(d, JVM_AVRO, "tuned")]),
    Prose(BENCHMARKS, rf"confluent-kafka's serializer spends {N}–{N} s of Python CPU per 2M rows",
          "avro-matrix-apache-4.4.json", lambda d: workers_cpu(d, CONFLUENT_AVRO)),
    Prose(BENCHMARKS, rf"{N}–{N}× what PySpark users write today, whose Python workers spend {N}–{N} CPU s per 2M rows "
                      rf"against ours' {N}–{N} \(every round\)", "protobuf-matrix-apache-4.4.json",
          lambda d: [*span(ratio(d, PROTOBUF, CONFLUENT_PROTOBUF, c) for c in cells(d)),
                     *workers_cpu(d, CONFLUENT_PROTOBUF), *workers_cpu(d, PROTOBUF)]),
    Prose(BENCHMARKS, rf"at 100 B the sink writes {N}–{N} of the rate of the same bytes pre-encoded with either format "
                      rf"\(Protobuf {N}–{N}, Avro {N}–{N};", "protobuf-matrix-apache-4.4.json",
          lambda d: [*format_costs(d, 100), *format_costs(d, 100, ["protobuf"]),
                     *format_costs(d, 100, ["avro-beside-protobuf"])]),
    Prose(BENCHMARKS, rf"at 1 KiB {N}–{N} \(bound by the broker\)", "protobuf-matrix-apache-4.4.json",
          lambda d: format_costs(d, 1024)),
    Prose(BENCHMARKS, rf"at 1 KiB tuned a task's worker spends {N} CPU s per GB at 4 and 64 partitions and {N} at 256, "
                      rf"against the floor's {N}", "spark-worker-profile-apache-4.4.json",
          lambda d: [profile_cell(d, 1024, 4, "tuned")["cpu_s_per_gb"], profile_cell(d, 1024, 256, "tuned")["cpu_s_per_gb"],
                     profile_cell(d, 1024, 4, "tuned")["unavoidable_s_per_gb"][
                         "the floor: Spark's no-op sink (the worker only counts the batches)"]]),
    Prose(BENCHMARKS, rf"\({N} against {N} tuned, {N} against {N} with defaults\)", "spark-worker-profile-apache-4.4.json",
          lambda d: [profile_cell(d, 1024, 256, "tuned")["cpu_s_per_gb"], profile_cell(d, 1024, 64, "tuned")["cpu_s_per_gb"],
                     profile_cell(d, 1024, 256, "defaults")["cpu_s_per_gb"],
                     profile_cell(d, 1024, 64, "defaults")["cpu_s_per_gb"]]),
    Prose(BENCHMARKS, rf"a write costs one InitProducerId, one DescribeTransactions and one EndTxn per task plus a fixed "
                      rf"{N}–{N} InitProducerId, {N} EndTxn and {N}–{N} ListTransactions", COST,
          lambda d: [*fixed_init_producer_ids(d), *{b["requests"]["EndTxn"] - b["tasks"] for b in d["batch"]},
                     *span([*(b["requests"]["ListTransactions"] for b in d["batch"]),
                            d["streaming"]["requests"]["ListTransactions"] / d["streaming"]["micro_batches"]])]),
    Prose(BENCHMARKS, rf"an idle driver {N} InitProducerId per second per prefix while its keeper lives \({N}–{N} s after "
                      rf"the run's writes, four prefixes: {N} a second; {N}–{N} s after, the streaming query's keeper alone: "
                      rf"{N} a second", COST,
          lambda d: [d["idle_driver"][0]["requests"]["InitProducerId"] / d["idle_driver"][0]["seconds"] / COST_RUN_PREFIXES,
                     *d["idle_driver"][0]["window_s"],
                     d["idle_driver"][0]["requests"]["InitProducerId"] / d["idle_driver"][0]["seconds"],
                     *d["idle_driver"][1]["window_s"],
                     d["idle_driver"][1]["requests"]["InitProducerId"] / d["idle_driver"][1]["seconds"]]),
    Prose(BENCHMARKS, rf"all {N} round ratios together: median \*\*{N}\*\*", EOS_COST,
          lambda d: [len(eos_rounds(d)), statistics.median(eos_rounds(d))]),
    Prose(BENCHMARKS, rf"per codec {N} \(none\) and {N} \(lz4\), best rounds {N} and {N}", EOS_COST,
          lambda d: [*(c["median_round_ratio"] for c in d["costs"]), *(c["ratio"] for c in d["costs"])]),
    Prose(BENCHMARKS, rf"\(single rounds {N}–{N}\)", EOS_COST, lambda d: span(eos_rounds(d))),
    Prose(BENCHMARKS, rf"before the tasks {N} s against {N} s, after them {N} s against {N} s", EOS_COST,
          lambda d: [eos_phase(d, "spark-pyprod-eos", "before_tasks"), eos_phase(d, OURS, "before_tasks"),
                     eos_phase(d, "spark-pyprod-eos", "after_tasks"), eos_phase(d, OURS, "after_tasks")]),
    Prose(BENCHMARKS, rf"while the tasks took about the same \(medians {N} s and {N} s\)", EOS_COST,
          lambda d: [eos_phase(d, "spark-pyprod-eos", "tasks"), eos_phase(d, OURS, "tasks")]),
    Prose(BENCHMARKS, rf"the exactly-once write's phase after its tasks took {N} s against the at-least-once write's "
                      rf"{N} s \(medians of the {N} rounds\), about {N} ms a task. Its tasks took {N} s against {N} s",
          EOS_TASKS,
          lambda d: [eos_phase(d, "spark-pyprod-eos", "after_tasks"), eos_phase(d, OURS, "after_tasks"),
                     d["meta"]["spark_rounds"], commit_seconds(d) / d["meta"]["spark_partitions"] * 1000,
                     eos_phase(d, "spark-pyprod-eos", "tasks"), eos_phase(d, OURS, "tasks")]),
    Prose(BENCHMARKS, rf"one write task of {N} rows makes {N} calls on its own thread on 91ff028 and {N} on 3230e77 "
                      rf"\(its Sender {N} and {N}\)", OBSERVABILITY,
          lambda d: [100_000, d["calls"]["before"]["task_thread"], d["calls"]["after"]["task_thread"],
                     d["calls"]["before"]["sender_thread"], d["calls"]["after"]["sender_thread"]]),
    Prose(BENCHMARKS, rf"the broker took in {N} bytes a record without the header and {N} with it", OBSERVABILITY,
          lambda d: [observability_bytes(d, "sdk"), observability_bytes(d, "task")]),
    Prose(OBSERVABILITY_PAGE, rf"at 100 B values the broker took in {N} bytes a record without it and {N} with it",
          OBSERVABILITY, lambda d: [observability_bytes(d, "sdk"), observability_bytes(d, "task")]),
    Prose(OBSERVABILITY_PAGE, rf"the workers' CPU per row rose by a median of {N} % in those runs", OBSERVABILITY,
          lambda d: [(observability_cost(d, [])[("Spark: traceHeaders=task ÷ an SDK set up",)][3][0] - 1) * 100]),
    Prose(BENCHMARKS, rf"`--spark-partitions {N} --spark-rows {N} --compression none --spark-rounds {N}`", EOS_TASKS,
          lambda d: [d["meta"]["spark_partitions"], d["meta"]["spark_rows"], d["meta"]["spark_rounds"]]),
]


def collapsed(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("prose", PROSE, ids=lambda p: p.id)
def test_a_figure_in_prose_is_its_json_s(prose: Prose):
    text = collapsed(page(prose.page))
    found = re.findall(prose.pattern, text)
    assert found, f"{prose.page} no longer says {prose.pattern!r}: update the entry with the sentence"
    cited = prose.source in text
    assert cited, f"{prose.page} quotes {prose.pattern!r} but no longer cites {prose.source}"
    expected = list(prose.values(figures(prose.source)))
    for groups in found:
        groups = groups if isinstance(groups, tuple) else (groups,)
        why = mismatches(expected, " ".join(groups))
        assert why is None, f"{prose.page}, {prose.pattern!r} against {prose.source}: {why}"


def test_every_figure_file_quoted_exists_and_every_entry_names_one():
    named = {t.source for t in TABLES} | {p.source for p in PROSE}
    assert named <= {p.name for p in FIGURES.glob("*.json")}, named - {p.name for p in FIGURES.glob("*.json")}
