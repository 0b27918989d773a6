"""The audit trail: who did what to an account, when and from which address (`record_audit`),
and `solarapi audit list`."""
