from planner.cli import entry

entry()
