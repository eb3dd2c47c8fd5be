"""Typer apps: parse options, call one service, render its result, map errors to exit codes.

Nothing outside this package imports it.
"""
