"""Charts drawn from results/ only: one plot kind per chart shape, a figure config picks one."""
