"""The verification engine: action grammar and matching, attribution, checks, verdicts, vacuity."""
