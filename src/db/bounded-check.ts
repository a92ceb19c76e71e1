/** Health checks bounded in time, one at a time. */

/**
 * `check` bounded by `timeoutMs` (false when it fails or is late; `signal` is aborted then, so
 * that the check lets go of what it holds), one at a time: callers meanwhile share its answer.
 */
export function boundedCheck(check: (timeoutMs: number, signal: AbortSignal) => Promise<void>): (timeoutMs: number) => Promise<boolean> {
  let running: Promise<boolean> | undefined;
  return (timeoutMs) => {
    running ??= (async () => {
      const late = new AbortController();
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<false>((r) => (timer = setTimeout(() => r(false), timeoutMs)));
      try {
        const attempt = check(timeoutMs, late.signal).then(
          () => true,
          () => false,
        );
        return await Promise.race([attempt, timedOut]);
      } finally {
        clearTimeout(timer);
        late.abort();
        running = undefined;
      }
    })();
    return running;
  };
}
