"""One perfgate session, without pytest: the ``perfgate`` fixture's object (``perfgate.Perfgate``),
the session's engines (``lab``), its named runs (``runs``), start-up checks (``startup``), engine
output capture (``enginelog``) and pytest-benchmark interop (``bench``)."""
