"""Pipeline stages. Each reads the run folder, does only the work still missing, and writes back:
suite -> generate -> verify -> preference set -> judge the set -> select -> analyse."""
