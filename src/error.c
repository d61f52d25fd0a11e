/* error.c -- the RANK_ERROR GError domain (see error.h). */
#include "error.h"

G_DEFINE_QUARK (rank - error - quark, rank_error)
