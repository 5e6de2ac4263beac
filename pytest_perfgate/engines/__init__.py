"""Engines: what requests are sent to. One module per kind behind :class:`base.Engine`."""
