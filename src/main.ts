/**
 * @module main
 * Process entry. It imports the program (cli/run.ts) dynamically so that a failure to load it is
 * still one line on stderr: the compiled executable unpacks LMDB's native addon into the
 * temporary directory, and a missing or read-only TMPDIR would otherwise end in a stack trace.
 */
try {
  await import("./cli/run.ts");
} catch (error) {
  const { code, message } = error as { code?: string; message?: string };
  const reason =
    code === "ERR_DLOPEN_FAILED"
      ? `cannot load a native module: ${message}; the executable unpacks it into the temporary directory (TMPDIR=${process.env.TMPDIR ?? "/tmp"}), which must exist and be writable`
      : `cannot load the program: ${message ?? String(error)}`;
  process.stderr.write(`tokenmint: ${reason}\n`);
  process.exit(1);
}

export {};
