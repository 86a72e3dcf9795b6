# placed: build, install (DESTDIR-aware), test, demo.
#   make                  release build of placed, placectl and placed-web
#   make install          into $(DESTDIR)$(PREFIX), config into $(DESTDIR)$(SYSCONFDIR): the daemon and
#                         placectl (make install-daemon) and the kiosk page (make install-web)
#   make test             every test (scripts/test)
#   make demo             the quick-start demo (scripts/demo)

PREFIX     ?= /usr
SYSCONFDIR ?= /etc
BINDIR     ?= $(PREFIX)/bin
UNITDIR    ?= $(PREFIX)/lib/systemd/system
DATADIR    ?= $(PREFIX)/share
MANDIR     ?= $(DATADIR)/man
INSTALL    ?= install
# Where SwiftPM builds (debian/rules uses its own, so a package build leaves .build alone) and extra
# flags for it (debian/rules: --disable-local-rpath, since the static stdlib leaves nothing to find).
SWIFT_BUILD_PATH ?= .build
SWIFT_FLAGS      ?=

BUILD := $(SWIFT_BUILD_PATH)/release
SWIFT_BUILD := swift build -c release --build-path $(SWIFT_BUILD_PATH) $(SWIFT_FLAGS)

.PHONY: all build install install-daemon install-web uninstall test demo clean

all: build

build:
	$(SWIFT_BUILD) --product placed
	$(SWIFT_BUILD) --product placectl
	$(SWIFT_BUILD) --product placed-web

install: install-daemon install-web

install-daemon: build
	$(INSTALL) -Dm755 $(BUILD)/placed   $(DESTDIR)$(BINDIR)/placed
	$(INSTALL) -Dm755 $(BUILD)/placectl $(DESTDIR)$(BINDIR)/placectl
	$(INSTALL) -Dm644 systemd/placed.service $(DESTDIR)$(UNITDIR)/placed.service
	$(INSTALL) -Dm644 systemd/placed.socket $(DESTDIR)$(UNITDIR)/placed.socket
	$(INSTALL) -Dm644 systemd/placed.sysusers.conf $(DESTDIR)$(PREFIX)/lib/sysusers.d/placed.conf
	$(INSTALL) -Dm644 systemd/placed.tmpfiles.conf $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/placed.conf
	$(INSTALL) -Dm644 etc/placed/placed.conf $(DESTDIR)$(SYSCONFDIR)/placed/placed.conf
	$(INSTALL) -dm755 $(DESTDIR)$(SYSCONFDIR)/placed/placed.conf.d
	$(INSTALL) -Dm644 etc/dbus-1/system.d/io.placed.Placed1.conf $(DESTDIR)$(DATADIR)/dbus-1/system.d/io.placed.Placed1.conf
	$(INSTALL) -Dm644 etc/dbus-1/system-services/io.placed.Placed1.service $(DESTDIR)$(DATADIR)/dbus-1/system-services/io.placed.Placed1.service
	$(INSTALL) -Dm644 etc/dbus-1/interfaces/io.placed.Placed1.xml $(DESTDIR)$(DATADIR)/dbus-1/interfaces/io.placed.Placed1.xml
	$(INSTALL) -Dm644 etc/io.placed.Places.varlink $(DESTDIR)$(DATADIR)/varlink/io.placed.Places.varlink
	$(INSTALL) -Dm644 etc/bash-completion/placectl $(DESTDIR)$(DATADIR)/bash-completion/completions/placectl
	$(INSTALL) -Dm644 man/placed.8 $(DESTDIR)$(MANDIR)/man8/placed.8
	$(INSTALL) -Dm644 man/placectl.1 $(DESTDIR)$(MANDIR)/man1/placectl.1
	$(INSTALL) -Dm644 man/placed.conf.5 $(DESTDIR)$(MANDIR)/man5/placed.conf.5
	$(INSTALL) -Dm644 data/helsinki-center.osm.pbf $(DESTDIR)$(DATADIR)/placed/helsinki-center.osm.pbf
	@echo "installed into $(DESTDIR)$(PREFIX); on a live system: systemd-sysusers; systemd-tmpfiles --create; systemctl reload dbus; systemctl daemon-reload; placectl import FILE.osm.pbf; systemctl enable --now placed"

# The kiosk page: placed-web, the page's files, its units and user. Leaflet is Debian's libjs-leaflet.
WEB_FILES := index.html app.js app.css favicon.svg
install-web: build
	$(INSTALL) -Dm755 $(BUILD)/placed-web $(DESTDIR)$(BINDIR)/placed-web
	for f in $(WEB_FILES); do $(INSTALL) -Dm644 web/$$f $(DESTDIR)$(DATADIR)/placed/web/$$f || exit 1; done
	$(INSTALL) -Dm644 systemd/placed-web.service $(DESTDIR)$(UNITDIR)/placed-web.service
	$(INSTALL) -Dm644 systemd/placed-web.socket $(DESTDIR)$(UNITDIR)/placed-web.socket
	$(INSTALL) -Dm644 systemd/placed-web.sysusers.conf $(DESTDIR)$(PREFIX)/lib/sysusers.d/placed-web.conf
	$(INSTALL) -Dm644 man/placed-web.8 $(DESTDIR)$(MANDIR)/man8/placed-web.8
	@echo "kiosk page installed; on a live system: systemd-sysusers; systemctl daemon-reload; systemctl enable --now placed-web.socket; open http://127.0.0.1:8080/"

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/placed $(DESTDIR)$(BINDIR)/placectl $(DESTDIR)$(UNITDIR)/placed.service \
	  $(DESTDIR)$(UNITDIR)/placed.socket \
	  $(DESTDIR)$(PREFIX)/lib/sysusers.d/placed.conf $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/placed.conf \
	  $(DESTDIR)$(DATADIR)/dbus-1/system.d/io.placed.Placed1.conf \
	  $(DESTDIR)$(DATADIR)/dbus-1/system-services/io.placed.Placed1.service \
	  $(DESTDIR)$(DATADIR)/dbus-1/interfaces/io.placed.Placed1.xml \
	  $(DESTDIR)$(DATADIR)/varlink/io.placed.Places.varlink \
	  $(DESTDIR)$(DATADIR)/bash-completion/completions/placectl \
	  $(DESTDIR)$(MANDIR)/man8/placed.8 $(DESTDIR)$(MANDIR)/man1/placectl.1 \
	  $(DESTDIR)$(MANDIR)/man5/placed.conf.5 \
	  $(DESTDIR)$(DATADIR)/placed/helsinki-center.osm.pbf \
	  $(DESTDIR)$(BINDIR)/placed-web $(DESTDIR)$(UNITDIR)/placed-web.service $(DESTDIR)$(UNITDIR)/placed-web.socket \
	  $(DESTDIR)$(PREFIX)/lib/sysusers.d/placed-web.conf $(DESTDIR)$(MANDIR)/man8/placed-web.8 $(addprefix $(DESTDIR)$(DATADIR)/placed/web/,$(WEB_FILES))
	-rmdir $(DESTDIR)$(DATADIR)/placed/web

test:
	scripts/test

demo:
	scripts/demo

clean:
	rm -rf $(SWIFT_BUILD_PATH)
