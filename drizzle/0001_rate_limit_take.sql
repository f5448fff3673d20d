-- R23: take up to p_n units from a subject's three fixed windows in one round trip.
-- Grants k = min(p_n, remaining of each window) and returns the usage before the grant, so the
-- caller can give each admitted request its exact Remaining value. Rows are locked in a fixed
-- order (minute, hour, day), so concurrent callers cannot deadlock.
CREATE FUNCTION rate_limit_take(
  p_subject text, p_minute timestamptz, p_hour timestamptz, p_day timestamptz,
  p_limit_minute integer, p_limit_hour integer, p_limit_day integer, p_n integer
) RETURNS TABLE(granted integer, used_minute integer, used_hour integer, used_day integer)
LANGUAGE plpgsql AS $$
DECLARE
  um integer; uh integer; ud integer; k integer;
BEGIN
  INSERT INTO rate_limit_counters (subject, "window", window_start, used)
  VALUES (p_subject, 'minute', p_minute, 0), (p_subject, 'hour', p_hour, 0), (p_subject, 'day', p_day, 0)
  ON CONFLICT DO NOTHING;
  SELECT c.used INTO um FROM rate_limit_counters c WHERE c.subject = p_subject AND c."window" = 'minute' AND c.window_start = p_minute FOR UPDATE;
  SELECT c.used INTO uh FROM rate_limit_counters c WHERE c.subject = p_subject AND c."window" = 'hour' AND c.window_start = p_hour FOR UPDATE;
  SELECT c.used INTO ud FROM rate_limit_counters c WHERE c.subject = p_subject AND c."window" = 'day' AND c.window_start = p_day FOR UPDATE;
  k := GREATEST(0, LEAST(p_n, p_limit_minute - um, p_limit_hour - uh, p_limit_day - ud));
  IF k > 0 THEN
    UPDATE rate_limit_counters c SET used = c.used + k
    WHERE c.subject = p_subject AND ((c."window" = 'minute' AND c.window_start = p_minute)
      OR (c."window" = 'hour' AND c.window_start = p_hour) OR (c."window" = 'day' AND c.window_start = p_day));
  END IF;
  RETURN QUERY SELECT k, um, uh, ud;
END;
$$;
