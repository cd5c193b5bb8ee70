"""Thin Typer commands: parse options, call the probe layer and pure logic, pick a renderer."""
