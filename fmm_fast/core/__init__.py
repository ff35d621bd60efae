"""The small core every stage shares: settings, run records, errors, data types, output ownership."""
