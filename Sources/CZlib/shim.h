#ifndef PLACED_CZLIB_SHIM_H
#define PLACED_CZLIB_SHIM_H
#include <zlib.h>

/* inflateInit is a macro over inflateInit_ with the header's version and struct size. */
static inline int placed_inflate_init(z_streamp stream) { return inflateInit(stream); }
/* deflateInit is a macro too (the benchmarks write synthetic .osm.pbf files). */
static inline int placed_deflate_init(z_streamp stream, int level) { return deflateInit(stream, level); }
#endif
