/* error.c -- the RANK_ERROR GError domain (see error.h). */
#include "error.h"

GQuark
rank_error_quark (void)
{
  return g_quark_from_static_string ("rank-error-quark");
}
