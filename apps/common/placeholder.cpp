// Placeholder so the target has a source until apps/common is written.
