/**
 * @module main
 * Process entry. The load guard comes first: it turns a failure to load the program's modules
 * (the native addon the executable unpacks into TMPDIR) into one line on stderr.
 */
import "./cli/load-guard.ts";
import "./cli/run.ts";
