# placed: build, install (DESTDIR-aware), test, demo.
#   make                  release build of placed and placectl
#   make install          into $(DESTDIR)$(PREFIX), config into $(DESTDIR)$(SYSCONFDIR)
#   make test             every test (scripts/test)
#   make demo             the quick-start demo (scripts/demo)

PREFIX     ?= /usr
SYSCONFDIR ?= /etc
BINDIR     ?= $(PREFIX)/bin
UNITDIR    ?= $(PREFIX)/lib/systemd/system
DATADIR    ?= $(PREFIX)/share
MANDIR     ?= $(DATADIR)/man
INSTALL    ?= install

BUILD := .build/release

.PHONY: all build install uninstall test demo clean

all: build

build:
	swift build -c release --product placed
	swift build -c release --product placectl

install: build
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
	@echo "installed into $(DESTDIR)$(PREFIX); on a live system: systemd-sysusers; systemd-tmpfiles --create; systemctl daemon-reload; placectl import FILE.osm.pbf; systemctl enable --now placed"

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/placed $(DESTDIR)$(BINDIR)/placectl $(DESTDIR)$(UNITDIR)/placed.service \
	  $(DESTDIR)$(UNITDIR)/placed.socket \
	  $(DESTDIR)$(PREFIX)/lib/sysusers.d/placed.conf $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/placed.conf \
	  $(DESTDIR)$(DATADIR)/dbus-1/system.d/io.placed.Placed1.conf \
	  $(DESTDIR)$(DATADIR)/dbus-1/system-services/io.placed.Placed1.service \
	  $(DESTDIR)$(DATADIR)/dbus-1/interfaces/io.placed.Placed1.xml \
	  $(DESTDIR)$(DATADIR)/varlink/io.placed.Places.varlink \
	  $(DESTDIR)$(DATADIR)/bash-completion/completions/placectl \
	  $(DESTDIR)$(MANDIR)/man8/placed.8 $(DESTDIR)$(MANDIR)/man1/placectl.1

test:
	scripts/test

demo:
	scripts/demo

clean:
	rm -rf .build
