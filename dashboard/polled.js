// A value read from the admin API again and again while shown: a new read starts this long after
// the last answer (never two at once), and again at once when `key` changes.
import { useEffect, useRef, useState } from 'preact/hooks';

export function usePolled(load, key, everyMs) {
  const [state, setState] = useState({ value: null, error: null, at: null });
  const latest = useRef(load);
  latest.current = load;
  useEffect(() => {
    let stopped = false;
    let timer;
    const poll = async () => {
      try {
        const value = await latest.current();
        if (!stopped) setState({ value, error: null, at: Date.now() });
      } catch (err) {
        // The last good answer stays on screen, marked stale by the error beside it.
        if (!stopped) setState((previous) => ({ ...previous, error: err.message }));
      }
      if (!stopped) timer = setTimeout(poll, everyMs);
    };
    void poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [key]);
  return state;
}
