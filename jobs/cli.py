"""The ``kafka-log-jobs`` command line: one click group, one small function per subcommand.

Subcommands only parse options, call the core and print; the Kafka logic lives in ``kafka_log_core``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from jobs import compact, export, options, package, report, retain
from jobs.context import topic_pattern
from kafka_log_core.errors import KafkaLogError, describe_os_error
from kafka_log_core.javacompat import parse_java_integer
from kafka_log_core.tools.cluster_metadata_text import CLUSTER_METADATA
from kafka_log_core.tools.coordinator_records import OFFSETS, SHARE_GROUP_STATE, TRANSACTION_LOG
from kafka_log_core.tools.dump import (
    DECODER_CLASSES,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_MESSAGE_SIZE,
    MAX_INT,
    STRING_DECODER,
    DumpOptions,
    DumpReport,
    dump_file,
    error_line,
    unknown_decoder_class,
)
from kafka_log_core.tools.remote_log_metadata_text import REMOTE_LOG_METADATA


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Offline jobs on Kafka's on-disk log format (segments, indexes, checkpoints)."""


# Subcommands: `compact`, `retain`, `report`, `export` and `offsets` are registered here, next to `dump`
# (a `@main.command()` function below, or `main.add_command(...)` of a command defined in jobs/).
main.add_command(compact.command)
main.add_command(retain.command)
main.add_command(report.command)
main.add_command(package.command)
main.add_command(export.command)


@main.command()
@options.log_dir_option(exists=True)
@click.option(
    "--topic",
    "topic_regex",
    metavar="REGEX",
    help="Topics to answer for (kafka-get-offsets' --topic: a regex, commas meaning or); default all.",
)
@click.option("--partitions", metavar="IDS", help="Comma-separated partition ids (default all).")
@click.option(
    "--topic-partitions",
    metavar="PATTERNS",
    help="Comma-separated TOPIC_REGEX[:N|:N-M|:N-|:-M] patterns (M exclusive); not with --topic or --partitions.",
)
@click.option("--exclude-internal-topics", is_flag=True, help="Leave out Kafka's internal topics.")
@click.option(
    "--time",
    "timestamp",
    default="-1",
    show_default=True,
    help="-1 or latest, -2 or earliest, -3 or max-timestamp, -4 or earliest-local, -5 or latest-tiered, "
    "-6 or earliest-pending-upload, or a timestamp in ms (kafka-get-offsets' --time).",
)
@options.max_batch_bytes_option
def offsets(
    log_dirs: tuple[str, ...],
    topic_regex: str | None,
    partitions: str | None,
    topic_partitions: str | None,
    exclude_internal_topics: bool,
    timestamp: str,
    max_batch_bytes: int,
) -> None:
    """Offsets per partition as kafka-get-offsets prints them (topic:partition:offset), from the indexes:
    sorted by ``topic-partition`` as text, and no line for a partition without an answer (a timestamp
    after its last record, an empty log's max timestamp), as kafka-get-offsets leaves it out."""
    from kafka_log_core.log.listing import log_dir_partitions
    from kafka_log_core.log.partition_log import LogDirState, PartitionLog
    from kafka_log_core.tools.offsets import (
        EARLIEST_PENDING_UPLOAD,
        TIME_NAMES,
        offset_for_time,
        partition_selection,
    )

    expected = "-1 to -6, " + ", ".join(TIME_NAMES) + " or a timestamp in ms"
    when = TIME_NAMES[timestamp] if timestamp in TIME_NAMES else parse_java_integer(timestamp)
    if when is None or when < EARLIEST_PENDING_UPLOAD:
        raise click.BadParameter(f"{timestamp!r} is not {expected}", param_hint="'--time'")
    topic_pattern(topic_regex)  # a regex that does not compile: the usage error every job gives
    try:
        chosen = partition_selection(topic_regex, partitions, topic_partitions, exclude_internal_topics)
    except KafkaLogError as err:
        raise click.UsageError(str(err)) from None
    failed = 0
    found_offsets: dict[str, str] = {}  # kafka-get-offsets orders by TopicPartition.toString()
    for log_dir in log_dirs:
        try:
            state = LogDirState.read(log_dir)
        except KafkaLogError as err:
            click.echo(f"error: {err}", err=True)
            failed += 1
            continue
        for tp in log_dir_partitions(Path(log_dir))[1]:
            if not chosen(tp):
                continue
            try:
                log = PartitionLog.open(log_dir, tp, state.for_partition(tp))
                found = offset_for_time(log, when, max_batch_bytes)
            except KafkaLogError as err:
                click.echo(f"error: {err}", err=True)
                failed += 1
                continue
            except OSError as err:
                click.echo(f"error: {describe_os_error(err)}", err=True)
                failed += 1
                continue
            if found is not None:
                found_offsets[str(tp)] = f"{tp.topic}:{tp.partition}:{found}"
    for key in sorted(found_offsets):
        click.echo(found_offsets[key])
    if failed:
        raise SystemExit(1)


@main.command()
@click.option(
    "--files",
    "files",
    multiple=True,
    required=True,
    metavar="FILE[,FILE...]",
    help="Comma-separated .log, .index, .timeindex, .txnindex, .snapshot or .checkpoint files (repeatable).",
)
@click.option("--deep-iteration", is_flag=True, help="Print every record, not only batches.")
@click.option(
    "--print-data-log", is_flag=True, help="Print keys and payloads as UTF-8 (implies --deep-iteration)."
)
@click.option(
    "--verify-index-only", is_flag=True, help="Check index entries against the log without printing them."
)
@click.option("--index-sanity-check", is_flag=True, help="Only run the index sanity check.")
@click.option(
    "--max-bytes",
    type=click.IntRange(0, MAX_INT),
    default=DEFAULT_MAX_BYTES,
    show_default=True,
    help="Read at most this many bytes of each .log file.",
)
@click.option(
    "--max-message-size",
    type=click.IntRange(0, MAX_INT),
    default=DEFAULT_MAX_MESSAGE_SIZE,
    show_default=True,
    help="Largest batch read at an offset-index position.",
)
@click.option("--skip-record-metadata", is_flag=True, help="Print only keys and payloads of data records.")
@click.option(
    "--offsets-decoder",
    is_flag=True,
    help="Decode __consumer_offsets records as JSON (implies --print-data-log).",
)
@click.option(
    "--transaction-log-decoder",
    is_flag=True,
    help="Decode __transaction_state records as JSON (implies --print-data-log).",
)
@click.option(
    "--cluster-metadata-decoder",
    is_flag=True,
    help="Decode KRaft metadata records (__cluster_metadata, snapshots) as JSON (implies --print-data-log).",
)
@click.option(
    "--remote-log-metadata-decoder",
    is_flag=True,
    help="Decode __remote_log_metadata records as Kafka prints them (implies --print-data-log).",
)
@click.option(
    "--share-group-state-decoder",
    is_flag=True,
    help="Decode __share_group_state records as JSON (implies --print-data-log).",
)
@click.option(
    "--key-decoder-class",
    is_flag=False,
    flag_value=STRING_DECODER,
    default=None,
    metavar="CLASS",
    help="Decode keys with one of Kafka's decoder classes (org.apache.kafka.tools.api.StringDecoder, "
    "IntegerDecoder, LongDecoder, DefaultDecoder; implies --print-data-log).",
)
@click.option(
    "--value-decoder-class",
    is_flag=False,
    flag_value=STRING_DECODER,
    default=None,
    metavar="CLASS",
    help="Decode values with one of Kafka's decoder classes (as --key-decoder-class).",
)
@options.max_batch_bytes_option
def dump(
    files: tuple[str, ...],
    deep_iteration: bool,
    print_data_log: bool,
    verify_index_only: bool,
    index_sanity_check: bool,
    max_bytes: int,
    max_message_size: int,
    skip_record_metadata: bool,
    offsets_decoder: bool,
    transaction_log_decoder: bool,
    cluster_metadata_decoder: bool,
    remote_log_metadata_decoder: bool,
    share_group_state_decoder: bool,
    key_decoder_class: str | None,
    value_decoder_class: str | None,
    max_batch_bytes: int,
) -> None:
    """Print segment files exactly as Kafka's kafka-dump-log does.

    A file that cannot be read gets one "error:" line on stderr; the other files are still dumped and
    the exit status is 1.
    """
    # kafka-dump-log takes the first decoder given in this order
    chosen = ((offsets_decoder, OFFSETS), (transaction_log_decoder, TRANSACTION_LOG),
              (cluster_metadata_decoder, CLUSTER_METADATA), (remote_log_metadata_decoder, REMOTE_LOG_METADATA),
              (share_group_state_decoder, SHARE_GROUP_STATE))  # fmt: skip
    decoder = next((name for given, name in chosen if given), "")
    classes_given = key_decoder_class is not None or value_decoder_class is not None
    if decoder:  # Kafka then never loads the decoder classes
        key_decoder_class = value_decoder_class = None
    for param, name in (
        ("--key-decoder-class", key_decoder_class),
        ("--value-decoder-class", value_decoder_class),
    ):
        if name is not None and name not in DECODER_CLASSES:
            raise click.BadParameter(unknown_decoder_class(name), param_hint=f"'{param}'")
    options = DumpOptions(
        deep_iteration=deep_iteration,
        print_data_log=print_data_log or bool(decoder) or classes_given,
        decoder=decoder,
        key_decoder=key_decoder_class or STRING_DECODER,
        value_decoder=value_decoder_class or STRING_DECODER,
        verify_index_only=verify_index_only,
        index_sanity_check=index_sanity_check,
        max_bytes=max_bytes,
        max_message_size=max_message_size,
        skip_record_metadata=skip_record_metadata,
        max_batch_bytes=max_batch_bytes,
    )
    paths = [path for value in files for path in value.split(",") if path]
    if not paths:
        raise click.BadParameter("no file given", param_hint="'--files'")
    missing = [path for path in paths if not os.path.exists(path)]
    if missing:
        raise click.BadParameter(f"no such file: {', '.join(missing)}", param_hint="'--files'")
    out, err = sys.stdout, sys.stderr
    for stream in (out, err):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")  # print what the terminal cannot show as '?', like Java
    report = DumpReport()
    failed = 0
    try:
        for path in paths:
            try:
                for line in dump_file(path, options, report):
                    (err if line.stderr else out).write(line.text + "\n")
            except BrokenPipeError:
                raise
            except Exception as problem:  # one line per unreadable file, never a traceback
                out.flush()
                err.write(error_line(problem, path) + "\n")
                failed += 1
        out.flush()
        for text in report.lines():
            err.write(text + "\n")
        out.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(1) from None
    if failed:
        raise SystemExit(1)
