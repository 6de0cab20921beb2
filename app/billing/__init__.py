"""Cloud bills (FOCUS) imported and reconciled with the runs (docs/finops.md)."""
