import { Argument } from 'commander';
import { checkQueueName } from '../util/queue-name.js';

/** A parser of a queue name given as `where` on the command line: the one rule (exit 2 naming it otherwise). */
export const queueName =
  (where: string) =>
  (value: string): string =>
    checkQueueName(value, where);

/** The `<queue>` argument of a command. */
export const queueArgument = (): Argument => new Argument('<queue>', 'a logical queue').argParser(queueName('<queue>'));
