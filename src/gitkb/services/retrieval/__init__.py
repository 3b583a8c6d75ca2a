"""Reading the indexes: SEARCH (``search``, ``semantic``, ``fusion``, ``search_settings``, ``tenancy``) and ASK (``ask``, ``ask_llm``)."""
