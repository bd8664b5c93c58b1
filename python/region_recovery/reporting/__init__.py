"""What recovery did, for people and programs: the versioned JSON report and its text rendering."""
