/**
 * @module main
 * Process entry. A server's stop signals are handled from the first moment (cli/stop-signal.ts).
 * The load guard comes next: it turns a failure to load the program's modules (the native addon
 * the executable unpacks into TMPDIR) into one line on stderr.
 */
import "./cli/stop-signal.ts";
import "./cli/load-guard.ts";
import "./cli/run.ts";
