"""Evidence of one scenario: audit events read tolerantly, the evidence bundle, its stored form."""
