"""`barnabas pipeline`: the shipped telemetry pipeline (generator and Structured Streaming job).

`generate` produces device readings with a progress bar; `run` optionally generates, then runs the
Spark job until the topic is drained (availableNow, the default) or, with `--follow`, until Ctrl-C.
`run` prints one JSON line per finished micro-batch on stdout. Re-running with the same `--out`
resumes from the checkpoints there: the file sinks stay exactly-once across a crashed driver.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from ._client import add_connection, connect_admin, positive_float, positive_int
from .errors import CliError

PIPELINES = ["telemetry"]
SOURCES = ["barnabas", "kafka"]
DEFAULT_SOURCE = "barnabas"


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "pipeline", help="generate telemetry and run the Spark telemetry pipeline",
        description="Device telemetry → Structured Streaming → windowed aggregates (Parquet, Delta), "
        "threshold alerts and dead letters (Kafka topics). Needs the spark extra and Java 17.",
    )  # fmt: skip
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    generate = actions.add_parser("generate", help="produce generated device readings (progress bar)")
    generate.add_argument("pipeline", choices=PIPELINES)
    add_connection(generate)
    _add_generator_options(generate)
    generate.add_argument("--readings", "-n", type=positive_int, required=True, help="distinct readings to produce")
    generate.add_argument("--json", action="store_true", help="print the summary as JSON")
    generate.set_defaults(run=run_generate)

    run = actions.add_parser("run", help="run the Structured Streaming job (optionally generating first)")
    run.add_argument("pipeline", choices=PIPELINES)
    add_connection(run)
    run.add_argument("--out", type=Path, required=True, help="output dir: tables and one checkpoint per query")
    run.add_argument("--generate", type=positive_int, metavar="N", help="first produce N generated readings")
    _add_generator_options(run)
    run.add_argument("--alerts-topic", default="alerts")
    run.add_argument("--dead-letter-topic", default="telemetry-dead-letters")
    run.add_argument(
        "--source",
        choices=SOURCES,
        default=DEFAULT_SOURCE,
        help=f"barnabas (Python data source) or kafka (Spark's JVM connector); default {DEFAULT_SOURCE}",
    )
    run.add_argument(
        "--kafka-delivery",
        choices=["exactly-once", "at-least-once"],
        default="exactly-once",
        help="alerts and dead letters: exactly-once (foreachBatch, skips what a crashed attempt sent; default) "
        "or at-least-once (the --sink format's Kafka sink)",
    )
    run.add_argument("--sink", choices=SOURCES, help="Kafka sink format for at-least-once (default: --source)")
    run.add_argument("--threshold", type=float, default=80.0, help="alert above this value (default 80)")
    run.add_argument("--window", default="1 minute", help="aggregation window (default '1 minute')")
    run.add_argument("--watermark", default="30 seconds", help="watermark delay (default '30 seconds')")
    run.add_argument("--max-offsets-per-trigger", type=positive_int, metavar="N", help="cap each micro-batch")
    run.add_argument(
        "--follow",
        type=positive_float,
        metavar="SECONDS",
        help="keep running with this trigger interval until Ctrl-C (default: drain and stop)",
    )
    run.add_argument("--no-delta", action="store_true", help="write Parquet only")
    run.add_argument("--master", default="local[2]")
    run.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    run.set_defaults(run=run_pipeline)


def _add_generator_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", default="telemetry", help="input topic (default telemetry)")
    parser.add_argument(
        "--partitions", type=positive_int, default=3, help="partitions if the topic is created (default 3)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--devices", type=positive_int, default=12)
    parser.add_argument("--duplicate-rate", type=share, default=0.05, help="share of readings sent twice")
    parser.add_argument("--malformed-rate", type=share, default=0.0, help="share of readings followed by a bad line")


def share(text: str) -> float:
    """An argparse type: a fraction in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, not {text}")
    return value


def run_generate(args: argparse.Namespace) -> int:
    connect_admin(args)  # one line, not a hang, when the cluster is unreachable
    started = time.monotonic()
    _generate(args, args.readings)
    seconds = time.monotonic() - started
    if args.json:
        print(json.dumps({"topic": args.topic, "readings": args.readings, "seconds": round(seconds, 3)}))
    else:
        rate = args.readings / seconds
        print(f"produced {args.readings} readings to {args.topic} in {seconds:.2f} s ({rate:,.0f}/s)")
    return 0


def run_pipeline(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    conf = {}
    for item in args.spark_conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--spark-conf {item!r}: expected KEY=VALUE")
        conf[key] = value
    connect_admin(args)
    if args.generate:
        _generate(args, args.generate)
    try:
        from py4j.protocol import Py4JError  # type: ignore[import-untyped]
        from pyspark.errors import PySparkException

        from barnabas.spark.pipeline.job import PipelineConfig, run
    except ImportError as exc:
        raise CliError(f"{exc}; install the spark extra: pip install 'barnabas[spark]'") from None
    config = PipelineConfig(
        bootstrap=args.bootstrap, out=args.out, input_topic=args.topic, alerts_topic=args.alerts_topic,
        dead_letter_topic=args.dead_letter_topic, source=args.source, sink=args.sink or args.source,
        threshold=args.threshold, window=args.window, watermark_delay=args.watermark,
        max_offsets_per_trigger=args.max_offsets_per_trigger, trigger_seconds=args.follow,
        delta=not args.no_delta, kafka_delivery=args.kafka_delivery, master=args.master, spark_conf=conf,
    )  # fmt: skip
    _ensure_pipeline_topics(args)
    try:
        stopped = run(config, on_batch=lambda batch: print(batch.to_line(), flush=True), should_stop=lambda: False)
    except (PySparkException, Py4JError) as exc:
        raise CliError(_first_line(str(exc))) from None
    print(f"pipeline {'stopped' if stopped else 'finished'}; output in {os.fspath(args.out)}", flush=True)
    return 0


def _generate(args: argparse.Namespace, readings: int) -> None:
    from rich.progress import Progress

    from barnabas.spark.pipeline.generator import TelemetrySpec, telemetry
    from barnabas.spark.pipeline.produce import produce

    spec = TelemetrySpec(
        readings=readings, seed=args.seed, devices=args.devices, duplicate_rate=args.duplicate_rate,
        malformed_rate=args.malformed_rate,
    )  # fmt: skip
    _ensure_pipeline_topics(args)
    records = list(telemetry(spec))
    try:
        with Progress(transient=True) as progress:
            task = progress.add_task(f"telemetry → {args.topic}", total=len(records))
            produce(args.bootstrap, args.topic, records, lambda sent: progress.update(task, completed=sent))
    except RuntimeError as exc:
        raise CliError(str(exc)) from None


def _ensure_pipeline_topics(args: argparse.Namespace) -> None:
    from barnabas.spark.pipeline.produce import ensure_topics

    topics = {args.topic: args.partitions}
    for name in ("alerts_topic", "dead_letter_topic"):
        if hasattr(args, name):
            topics[getattr(args, name)] = 1
    try:
        ensure_topics(args.bootstrap, topics)
    except RuntimeError as exc:
        raise CliError(str(exc)) from None


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "unknown error")
