/* format.c -- integers in decimal, fast (see format.h). */
#include "format.h"

#include <string.h>

/* "00" to "99": rank_format_int writes two digits a division. */
static const char digit_pairs[201]
    = "00010203040506070809101112131415161718192021222324"
      "25262728293031323334353637383940414243444546474849"
      "50515253545556575859606162636465666768697071727374"
      "75767778798081828384858687888990919293949596979899";

gsize
rank_format_int (char *out, gint64 value)
{
  char digits[20];
  char *p = digits + sizeof digits;
  /* The magnitude, without the overflow of -G_MININT64. */
  guint64 v = value < 0 ? (guint64) (-(value + 1)) + 1 : (guint64) value;
  gsize len = 0, n;

  /* Two digits a division: a number an update sends has about 13. */
  while (v >= 100)
    {
      guint64 d = v % 100;

      v /= 100;
      p -= 2;
      memcpy (p, digit_pairs + 2 * d, 2);
    }
  if (v >= 10)
    {
      p -= 2;
      memcpy (p, digit_pairs + 2 * v, 2);
    }
  else
    *--p = (char) ('0' + v);
  if (value < 0)
    out[len++] = '-';
  n = (gsize) (digits + sizeof digits - p);
  memcpy (out + len, p, n);
  len += n;
  out[len] = '\0';
  return len;
}
