// The CLI's hook commands (conformance, simulate, hook, approve), run in this process.
import { Command } from 'commander';
import { type CliIo, registerHookCommands } from '../../hooks/cli.ts';

/** Runs `knative-prestart <args>` in process (the hook commands), capturing output and exit code. */
export async function runCli(args: string[]): Promise<{ out: string; code: number }> {
  let out = '';
  let code = 0;
  const io: CliIo = {
    out: (text) => {
      out += `${text}\n`;
    },
    setExitCode: (c) => {
      code = c;
    },
  };
  const program = new Command('knative-prestart').exitOverride();
  registerHookCommands(program, io);
  await program.parseAsync(['node', 'knative-prestart', ...args]);
  return { out, code };
}
