/** `step`, or a rejection with the signal's reason once it aborts (the step settles on its own, observed). */
export function untilAborted<T>(step: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return step;
  step.catch(() => undefined);
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    step.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
