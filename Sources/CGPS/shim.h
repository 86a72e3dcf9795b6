#ifndef PLACED_CGPS_SHIM_H
#define PLACED_CGPS_SHIM_H
#include <gps.h>
#include <math.h>
#endif
