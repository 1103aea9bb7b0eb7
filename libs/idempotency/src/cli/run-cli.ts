import { CliCommand, CliContext, cliContext, CliOutput, COMMON_HELP, UsageError } from './cli-context';
import { KEY_COMMANDS } from './key-commands';
import { RECONCILE_COMMANDS } from './reconcile-command';
import { STEP_COMMANDS } from './step-commands';
import { TABLE_COMMANDS } from './table-commands';

export type { CliOutput } from './cli-context';

const COMMANDS: Record<string, CliCommand> = {
  ...TABLE_COMMANDS,
  ...RECONCILE_COMMANDS,
  ...KEY_COMMANDS,
  ...STEP_COMMANDS,
};

const USAGE = `Usage: nestjs-dynamodb-idempotency <command> [flags]

${Object.entries(COMMANDS)
  .map(([name, command]) => `  ${name.padEnd(14)} ${command.summary}`)
  .join('\n')}

Run a command with --help for its flags. Exit codes: 0 done or found, 1 not found, refused or failed, 2 usage or
misconfigured (a table missing, or whose key schema is not the one the flags or --config describe), 3 (reconcile)
stuck items could not be released.`;

/**
 * The package's binary (`npx nestjs-dynamodb-idempotency …`): the table tooling and an operator's commands for one
 * key. Returns the exit code: 0 done or found, 1 not found or refused, 2 usage.
 */
export async function runCli(
  argv: string[],
  out: CliOutput & { confirm?(question: string): Promise<boolean> } = console,
): Promise<number> {
  const name = argv.find((arg) => !arg.startsWith('-'));
  const command = name === undefined ? undefined : COMMANDS[name];
  if (!command) {
    // Asked for: the usage on stdout. A wrong or missing command: on stderr, exit 2.
    if (argv.includes('--help') && name === undefined) {
      out.log(USAGE);
      return 0;
    }
    out.error(USAGE);
    return 2;
  }
  const help = `Usage: nestjs-dynamodb-idempotency ${command.usage}\n\n${command.summary}.\n\n${COMMON_HELP}`;
  let context: CliContext | undefined;
  try {
    context = cliContext(argv, command.flags, out);
    if (context.values.help) {
      out.log(help);
      return 0;
    }
    return await command.run(context);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    out.error(`${error.message}\n\n${help}`);
    return 2;
  } finally {
    context?.client.destroy();
  }
}

/** The table commands alone, as earlier versions exported them. */
export const runTableCli = runCli;
