/* format.h -- integers in decimal for Redis commands, request ids and
 * rankctl's files. */
#ifndef RANK_FORMAT_H
#define RANK_FORMAT_H

#include <glib.h>

/* value in decimal, as "%" G_GINT64_FORMAT prints it, NUL-terminated,
 * into out (room for RANK_FORMAT_INT_MAX bytes); returns its length. */
#define RANK_FORMAT_INT_MAX 21
gsize rank_format_int (char *out, gint64 value);

#endif /* RANK_FORMAT_H */
