"""Account administration for the operator: password resets, disabling and enabling an
account, erasing one with everything tied to it, plan and key changes from the command line —
each recorded in the audit trail."""
