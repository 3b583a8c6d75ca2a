"""Who may call what: principals, and the one policy every interface asks (see ``policy``)."""
