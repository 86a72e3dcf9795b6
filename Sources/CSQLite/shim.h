#ifndef PLACED_CSQLITE_SHIM_H
#define PLACED_CSQLITE_SHIM_H
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a macro casting -1 to a function pointer; Swift cannot import it. */
static inline sqlite3_destructor_type placed_sqlite_transient(void) { return SQLITE_TRANSIENT; }

/* sqlite3_db_config is variadic. Defensive mode off: plain SQL may write a virtual table's shadow
   tables (the import writes the map layer's R*Tree as a packed tree). */
static inline int placed_sqlite_set_defensive(sqlite3 *db, int on) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, on, (int *)0);
}
#endif
