/* access.c -- the grants of roles to identities on board patterns (see
 * access.h). A configuration's grants are few (a section per client
 * service), so a call's check walks its identity's patterns of the role it
 * needs; GPatternSpec matches each without allocating.
 */
#include "access.h"

#include <string.h>

#include "constants.h"
#include "error.h"

static const char *const role_names[] = { "read", "write", "admin", "none" };

/* One pattern granted: as written, and compiled. */
typedef struct
{
  char *text;
  GPatternSpec *spec;
} Pattern;

/* One identity's grants: its patterns per role. */
typedef struct
{
  GPtrArray *patterns[RANK_ROLES]; /* Pattern * */
} Entry;

struct _RankGrants
{
  GHashTable *names; /* name (an identity or "anonymous") -> Entry * */
};

const char *
rank_role_name (RankRole role)
{
  return role_names[MIN (role, RANK_ROLE_NONE)];
}

gboolean
rank_role_parse (const char *name, RankRole *role)
{
  for (int r = 0; r < RANK_ROLES; r++)
    if (strcmp (name, role_names[r]) == 0)
      {
        *role = (RankRole) r;
        return TRUE;
      }
  return FALSE;
}

static void
pattern_free (gpointer data)
{
  Pattern *p = data;

  g_free (p->text);
  g_pattern_spec_free (p->spec);
  g_free (p);
}

static Entry *
entry_new (void)
{
  Entry *e = g_new0 (Entry, 1);

  for (int r = 0; r < RANK_ROLES; r++)
    e->patterns[r] = g_ptr_array_new_with_free_func (pattern_free);
  return e;
}

static void
entry_free (gpointer data)
{
  Entry *e = data;

  for (int r = 0; r < RANK_ROLES; r++)
    g_ptr_array_unref (e->patterns[r]);
  g_free (e);
}

RankGrants *
rank_grants_new (void)
{
  RankGrants *grants = g_new0 (RankGrants, 1);

  grants->names
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, entry_free);
  return grants;
}

void
rank_grants_free (RankGrants *grants)
{
  if (grants == NULL)
    return;
  g_hash_table_unref (grants->names);
  g_free (grants);
}

gboolean
rank_grants_pattern_ok (const char *pattern, GError **error)
{
  gsize len = strlen (pattern);

  if (len == 0 || len > RANK_BOARD_MAX_BYTES)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "a board pattern must be 1-%d bytes, got %" G_GSIZE_FORMAT,
                   RANK_BOARD_MAX_BYTES, len);
      return FALSE;
    }
  if (!g_utf8_validate (pattern, (gssize) len, NULL))
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "board pattern '%s' is not UTF-8", pattern);
      return FALSE;
    }
  for (const char *p = pattern; *p != '\0'; p++)
    if ((guchar) *p < 0x20 || *p == 0x7f || *p == '{' || *p == '}')
      {
        g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                     "board pattern '%s': '%c' (byte 0x%02x) is in no board "
                     "name (patterns are board names with * and ? globs, "
                     "separated by ;)",
                     pattern, g_ascii_isprint (*p) ? *p : '?', (guchar) *p);
        return FALSE;
      }
  return TRUE;
}

static Entry *
entry_of (RankGrants *grants, const char *name)
{
  Entry *e = g_hash_table_lookup (grants->names, name);

  if (e == NULL)
    {
      e = entry_new ();
      g_hash_table_insert (grants->names, g_strdup (name), e);
    }
  return e;
}

void
rank_grants_add (RankGrants *grants, const char *name, RankRole role,
                 const char *pattern)
{
  Entry *e = entry_of (grants, name);
  Pattern *p;

  if (role >= RANK_ROLES)
    return;
  for (guint i = 0; i < e->patterns[role]->len; i++)
    if (strcmp (((Pattern *) e->patterns[role]->pdata[i])->text, pattern) == 0)
      return;
  p = g_new (Pattern, 1);
  p->text = g_strdup (pattern);
  p->spec = g_pattern_spec_new (pattern);
  g_ptr_array_add (e->patterns[role], p);
}

gboolean
rank_grants_add_option (RankGrants *grants, const char *option, GError **error)
{
  const char *eq = strchr (option, '=');
  g_autofree char *name = NULL;
  g_auto (GStrv) roles = NULL;
  RankRole parsed[RANK_ROLES];
  guint n = 0;

  if (eq == NULL || eq == option || eq[1] == '\0')
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "--grant: '%s' is not NAME=ROLE[,ROLE...] (NAME an "
                   "identity or anonymous; ROLE read, write or admin)",
                   option);
      return FALSE;
    }
  name = g_strndup (option, (gsize) (eq - option));
  roles = g_strsplit (eq + 1, ",", -1);
  for (guint i = 0; roles[i] != NULL; i++)
    {
      if (!rank_role_parse (roles[i], &parsed[n]))
        {
          g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                       "--grant %s: '%s' is not a role (read, write or "
                       "admin)",
                       option, roles[i]);
          return FALSE;
        }
      if (n < RANK_ROLES)
        n++;
    }
  for (guint i = 0; i < n; i++)
    rank_grants_add (grants, name, parsed[i], "*");
  return TRUE;
}

gboolean
rank_grants_configured (const RankGrants *grants)
{
  return grants != NULL && g_hash_table_size (grants->names) > 0;
}

/* The grants of identity: its own entry, or anonymous's when it has none.
 * NULL: none at all. A certificate named "anonymous" is not the
 * anonymous caller. */
static const Entry *
entry_for (const RankGrants *grants, const char *identity)
{
  if (identity != NULL && strcmp (identity, RANK_ACCESS_ANONYMOUS) == 0)
    return NULL;
  return g_hash_table_lookup (
      grants->names, identity != NULL ? identity : RANK_ACCESS_ANONYMOUS);
}

gboolean
rank_grants_allow (const RankGrants *grants, const char *identity,
                   RankRole role, const char *board)
{
  const Entry *e;
  gsize len;

  if (role >= RANK_ROLES)
    return TRUE;
  if (!rank_grants_configured (grants))
    return role != RANK_ROLE_ADMIN;
  if ((e = entry_for (grants, identity)) == NULL)
    return FALSE;
  len = strlen (board);
  for (guint i = 0; i < e->patterns[role]->len; i++)
    if (g_pattern_spec_match (
            ((const Pattern *) e->patterns[role]->pdata[i])->spec, len, board,
            NULL))
      return TRUE;
  return FALSE;
}

gboolean
rank_grants_any (const RankGrants *grants, const char *identity, RankRole role)
{
  const Entry *e;

  if (role >= RANK_ROLES)
    return TRUE;
  if (!rank_grants_configured (grants))
    return role != RANK_ROLE_ADMIN;
  e = entry_for (grants, identity);
  return e != NULL && e->patterns[role]->len > 0;
}

static int
compare_strings (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

char **
rank_grants_describe (const RankGrants *grants, const char *identity)
{
  GPtrArray *out = g_ptr_array_new ();
  const Entry *e;

  if (!rank_grants_configured (grants))
    {
      g_ptr_array_add (out, g_strdup ("read:*"));
      g_ptr_array_add (out, g_strdup ("write:*"));
    }
  else if ((e = entry_for (grants, identity)) != NULL)
    for (int r = 0; r < RANK_ROLES; r++)
      for (guint i = 0; i < e->patterns[r]->len; i++)
        g_ptr_array_add (
            out, g_strdup_printf (
                     "%s:%s", role_names[r],
                     ((const Pattern *) e->patterns[r]->pdata[i])->text));
  g_ptr_array_sort (out, compare_strings);
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (out, FALSE);
}
