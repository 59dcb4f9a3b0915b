"""The tests, in folders that mirror the packages they pin (tests/format for kafka_log_core.format, ...).

tests/broker holds the real-broker tests beside the Maven poms that fetch the broker's jars; the helpers
every folder shares (logbuild, metadata_build, clirun, kafka_harness) and the layout test stay here.
Every folder is a package, so that a test module is imported by its full name (tests.rules.test_cleaner)
and no folder here can stand in for the package of the same name (tests/jobs is not ``jobs``).
"""
