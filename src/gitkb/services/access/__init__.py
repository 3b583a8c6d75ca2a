"""Who may call what: principals, the one policy every interface asks (``policy``), knowledge bases and their agents (``knowledge``), web page sessions (``ui_sessions``)."""
