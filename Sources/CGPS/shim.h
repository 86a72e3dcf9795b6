#ifndef PLACED_CGPS_SHIM_H
#define PLACED_CGPS_SHIM_H
#include <gps.h>
#include <math.h>

// placed does not link libgps (and the libdbus and libstdc++ it brings): GPSDSource opens it when it
// first connects (GPSLibrary.swift) and calls these functions through pointers of their header's types.
typedef int (*placed_gps_open_fn)(const char *, const char *, struct gps_data_t *);
typedef int (*placed_gps_close_fn)(struct gps_data_t *);
typedef int (*placed_gps_read_fn)(struct gps_data_t *, char *message, int message_len);
typedef int (*placed_gps_stream_fn)(struct gps_data_t *, unsigned int, void *);
typedef const char *(*placed_gps_errstr_fn)(const int);
#endif
