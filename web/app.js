// The kiosk page: the likely places from placed (through placed-web), live over Server-Sent Events;
// a tap selects a place and drops the marker with its name and address, as in the current-place
// tutorial, and the selected place's details follow (open now, the week's hours, phone, website,
// wheelchair access). No framework, no inline script (CSP default-src 'self').
"use strict";

(function () {
  const token = document.querySelector('meta[name="placed-token"]').content;
  const banner = document.getElementById("banner");
  const list = document.getElementById("places");
  const empty = document.getElementById("empty");
  const status = document.getElementById("status");
  const visitLine = document.getElementById("visit");
  const message = document.getElementById("message");
  const selected = document.getElementById("selected");

  // Drawing order of the map layer (IDL: green, water, square, building, rail, path, street).
  const KIND_ORDER = ["green", "water", "square", "building", "rail", "path", "street"];
  const KIND_STYLE = {
    green: { color: "#9bc89b", weight: 0, fillColor: "#c8e6c0", fillOpacity: 1 },
    water: { color: "#8fb8de", weight: 0, fillColor: "#aad3f5", fillOpacity: 1 },
    square: { color: "#d6d3cc", weight: 0, fillColor: "#ece9e2", fillOpacity: 1 },
    building: { color: "#b9aea0", weight: 1, fillColor: "#d9d0c7", fillOpacity: 1 },
    rail: { color: "#8c8c8c", weight: 2, dashArray: "6 4" },
    path: { color: "#b0a08a", weight: 1.5, dashArray: "3 3" },
    street: { color: "#ffffff", weight: 6 },
  };

  const map = L.map("map", { zoomControl: true, attributionControl: true }).setView([60.1699, 24.9384], 17);
  // The map layer can be thousands of shapes: one canvas. The few things on top stay SVG elements.
  const mapRenderer = L.canvas({ padding: 0.5 });
  const showZoom = () => { map.getContainer().dataset.zoom = String(map.getZoom()); };
  map.on("zoomend", showZoom);
  showZoom();
  map.attributionControl.setPrefix("Leaflet");
  map.attributionControl.addAttribution("© OpenStreetMap contributors");

  let mapLayer = null;
  let mapCenter = null;
  let mapRadius = 0;
  let mapPending = false;
  let accuracyCircle = null;
  let positionDot = null;
  let placeDots = L.layerGroup().addTo(map);
  let markerLayer = null;
  let markerKey = null;
  let lastPanByUser = 0;
  let state = null;
  let gatewayDown = false;

  // A larger screen, a zoom out or a pan may need more of the map layer.
  map.on("moveend resize", () => {
    const center = map.getCenter();
    loadMapIfNeeded({ latitude: center.lat, longitude: center.lng });
  });

  map.on("dragstart zoomstart", (event) => {
    if (event.originalEvent || event.type === "dragstart") lastPanByUser = Date.now();
  });

  // MARK: formatting

  function formatDistance(metres) {
    if (metres < 1000) return Math.round(metres) + " m";
    return (metres / 1000).toFixed(1) + " km";
  }

  function formatLikelihood(value) {
    const percent = value * 100;
    return (percent >= 10 ? Math.round(percent) : percent.toFixed(1)) + " %";
  }

  // "amenity=cafe" is a cafe; "building=yes" a building.
  function formatKind(kind) {
    const [key, value] = kind.includes("=") ? kind.split("=", 2) : [kind, ""];
    return (value && value !== "yes" ? value : key).replace(/_/g, " ");
  }

  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // MARK: rendering

  function render(next) {
    state = next;
    renderBanner();
    renderList();
    renderLocation();
    renderMarker();
    renderVisit();
  }

  function renderBanner() {
    let kind = null;
    let text = "";
    if (gatewayDown) {
      kind = "offline";
      text = "The kiosk server is not answering. Retrying…";
    } else if (state && state.upstream === "unreachable") {
      kind = "unreachable";
      text = "placed is unreachable: showing the last known places. Retrying…";
    } else if (state && state.upstream === "connecting") {
      kind = "connecting";
      text = "Connecting to placed…";
    } else if (state && state.stale) {
      kind = "stale";
      text = "No fresh position from the GPS: the places shown may be out of date.";
    }
    banner.hidden = kind === null;
    banner.textContent = text;
    if (kind) banner.dataset.kind = kind;
    else delete banner.dataset.kind;
    document.body.classList.toggle("degraded", kind !== null);
    if (!state) return;
    const location = state.location;
    status.textContent = location
      ? "Ranking " + state.generation + (location.accuracy ? " · ±" + Math.round(location.accuracy) + " m" : "")
      : "Waiting for a position…";
  }

  function renderList() {
    const places = state.places || [];
    const markerId = state.marker ? state.marker.place.id : null;
    list.replaceChildren(...places.map((place, index) => {
      const item = element("li");
      const button = element("button", "place");
      button.type = "button";
      button.dataset.id = place.id;
      button.dataset.likelihood = String(place.likelihood);
      button.dataset.rank = String(index + 1);
      button.setAttribute("aria-pressed", String(place.id === markerId));
      const fill = element("span", "fill");
      fill.style.width = Math.max(0, Math.min(100, place.likelihood * 100)).toFixed(1) + "%";
      const bar = element("span", "bar");
      bar.setAttribute("role", "presentation");
      bar.append(fill);
      button.append(
        element("span", "name", place.name),
        element("span", "distance", formatDistance(place.distance)),
        element("span", "kind", formatKind(place.kind)),
        element("span", "likelihood", formatLikelihood(place.likelihood)),
        bar);
      button.setAttribute("aria-label",
        place.name + ", " + formatKind(place.kind) + ", " + formatDistance(place.distance) +
        ", likelihood " + formatLikelihood(place.likelihood));
      button.addEventListener("click", () => select(place, button));
      item.append(button);
      return item;
    }));
    list.dataset.generation = String(state.generation);
    // User Timing: how long from navigation to the first list (bench/kiosk.py reads it).
    if (places.length && !performance.getEntriesByName("placed-first-list").length) {
      performance.mark("placed-first-list");
    }
    empty.hidden = places.length > 0 || !state.location;

    placeDots.clearLayers();
    // Leaflet sets a string tooltip as HTML: a name from the map data goes in as a text node.
    for (const place of places) {
      L.circleMarker([place.latitude, place.longitude], {
        radius: 7, color: "#1f6feb", weight: 2, fillColor: "#fff", fillOpacity: 1, className: "likely-place",
      }).bindTooltip(element("span", "tooltip-name", place.name)).addTo(placeDots);
    }
  }

  function renderLocation() {
    const location = state.location;
    if (!location) return;
    const here = [location.latitude, location.longitude];
    // Accuracy is the 95 % radius in metres, as placed and gpsd state it.
    const radius = location.accuracy || 0;
    if (!accuracyCircle) {
      accuracyCircle = L.circle(here, {
        radius, color: "#1f6feb", weight: 1, fillOpacity: 0.12, className: "accuracy", interactive: false,
      }).addTo(map);
      positionDot = L.circleMarker(here, {
        radius: 8, color: "#fff", weight: 3, fillColor: "#1f6feb", fillOpacity: 1, className: "position",
        interactive: false,
      }).addTo(map);
      map.setView(here, 17);
    } else {
      accuracyCircle.setLatLng(here).setRadius(radius);
      positionDot.setLatLng(here);
      if (Date.now() - lastPanByUser > 30000) map.panTo(here, { animate: false });
    }
    loadMapIfNeeded(location);
  }

  function renderMarker() {
    const marker = state.marker;
    const key = marker ? marker.selection + ":" + marker.place.id : null;
    if (key === markerKey) return;
    markerKey = key;
    if (markerLayer) {
      markerLayer.remove();
      markerLayer = null;
    }
    selected.hidden = !marker;
    if (!marker) return;
    const place = marker.place;
    const content = element("div", "popup");
    content.append(element("div", "popup-name", place.name));
    if (place.address) content.append(element("div", "popup-address", place.address));
    markerLayer = L.marker([place.latitude, place.longitude], { title: place.name, alt: place.name })
      .bindPopup(content, { autoClose: false, closeOnClick: false, closeButton: false, autoPan: false })
      .addTo(map);
    markerLayer.openPopup();
    document.getElementById("selected-name").textContent = place.name;
    document.getElementById("selected-address").textContent = place.address || "";
    loadDetails(place.id, key);
  }

  // MARK: the selected place's details

  const details = document.getElementById("details");
  const language = navigator.language || "en";
  const DAY = 86400000;

  // Today's record, then the same place at this time on each of the next six days (their intervals).
  function loadDetails(id, key) {
    details.hidden = true;
    const ask = (time) => fetch("/details?id=" + encodeURIComponent(id) + "&language=" + encodeURIComponent(language) +
      (time ? "&time=" + encodeURIComponent(time.toISOString()) : ""), { headers: { Accept: "application/json" } })
      .then((response) => response.ok ? response.json() : Promise.reject(response.status));
    const now = Date.now();
    const days = [0, 1, 2, 3, 4, 5, 6].map((n) => new Date(now + n * DAY));
    Promise.all(days.map((day, n) => ask(n === 0 ? null : day)))
      .then((replies) => {
        if (key !== markerKey) return;  // another place was selected meanwhile
        renderDetails(replies[0].place, days, replies.map((reply) => reply.place.intervals));
      })
      .catch(() => { /* no details (an older placed): the card keeps the name and address */ });
  }

  function formatChange(iso) {
    const when = new Date(iso);
    const sameDay = new Date().toDateString() === when.toDateString();
    const time = when.toLocaleTimeString(language, { hour: "2-digit", minute: "2-digit" });
    return sameDay ? time : when.toLocaleDateString(language, { weekday: "short" }) + " " + time;
  }

  function renderDetails(place, days, weekIntervals) {
    const now = document.getElementById("details-now");
    now.textContent = "";
    delete now.dataset.open;
    if (place.open_now === true || place.open_now === false) {
      now.dataset.open = String(place.open_now);
      const change = place.next_change ? formatChange(place.next_change) : null;
      now.textContent = place.open_now
        ? "Open now" + (change ? " · closes " + change : "")
        : "Closed" + (change ? " · opens " + change : "");
    } else if (place.opening_hours) {
      now.textContent = "Hours: " + place.opening_hours;
    }
    const week = document.querySelector("#details-week tbody");
    week.replaceChildren();
    if (place.opening_hours && weekIntervals.every((intervals) => Array.isArray(intervals))) {
      days.forEach((day, n) => {
        const row = element("tr");
        row.append(element("th", null, day.toLocaleDateString(language, { weekday: "short" })));
        const intervals = weekIntervals[n];
        const text = intervals.length
          ? intervals.map((i) => i.start + "–" + i.end + (i.state === "unknown" ? " ?" : "")).join(", ")
          : "Closed";
        row.append(element("td", null, text));
        if (n === 0) row.className = "today";
        week.append(row);
      });
    }
    const contact = document.getElementById("details-contact");
    contact.replaceChildren();
    for (const phone of place.phone || []) {
      const link = element("a", "phone", phone);
      link.href = "tel:" + phone.replace(/[^0-9+]/g, "");
      const item = element("li");
      item.append(link);
      contact.append(item);
    }
    for (const website of place.website || []) {
      const item = element("li");
      // Only the web's own schemes become links: a tag may hold anything.
      const url = /^https?:\/\//i.test(website) ? website : (/^[\w.-]+\.[a-z]{2,}(\/.*)?$/i.test(website) ? "https://" + website : null);
      if (url) {
        const link = element("a", "website", website.replace(/^https?:\/\//i, "").replace(/\/$/, ""));
        link.href = url;
        link.rel = "noopener noreferrer";
        link.target = "_blank";
        item.append(link);
      } else {
        item.textContent = website;
      }
      contact.append(item);
    }
    if (place.wheelchair) {
      const words = { yes: "Wheelchair accessible", limited: "Limited wheelchair access",
        no: "Not wheelchair accessible", designated: "Wheelchair accessible" };
      const item = element("li", "wheelchair", words[place.wheelchair] || "Wheelchair: " + place.wheelchair);
      item.dataset.wheelchair = place.wheelchair;
      contact.append(item);
    }
    details.hidden = !(now.textContent || week.children.length || contact.children.length);
    if (details.hidden) return;
    // The hours on the map too, under the name, and the card scrolled into a small screen's view.
    const popup = markerLayer && markerLayer.getPopup() && markerLayer.getPopup().getContent();
    if (popup && now.dataset.open) {
      const line = element("div", "popup-hours", now.textContent);
      line.dataset.open = now.dataset.open;
      popup.append(line);
      markerLayer.getPopup().update();
    }
    selected.scrollIntoView({ block: "nearest" });
  }

  function renderVisit() {
    // placed's Visit: the place so far, else the most likely place when the visit started.
    const visit = state.visit;
    const place = visit && (visit.place || (visit.places && visit.places[0]));
    visitLine.hidden = !(place && place.name);
    if (place && place.name) {
      const since = visit.started;
      visitLine.textContent = "Visiting " + place.name +
        (since ? " since " + new Date(since).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : "");
    }
  }

  // MARK: the map layer

  function metresBetween(a, b) {
    return map.distance([a.latitude, a.longitude], [b.latitude, b.longitude]);
  }

  function wantedRadius() {
    // Enough to cover the view with room to move (the view's half diagonal and half again).
    const bounds = map.getBounds();
    const diagonal = map.distance(bounds.getNorthWest(), bounds.getSouthEast());
    return Math.max(300, Math.min(900, Math.round(diagonal * 0.75) || 500));
  }

  // The map layer around `location` unless what is loaded already covers the view there.
  function loadMapIfNeeded(location) {
    if (mapPending) return;
    const radius = wantedRadius();
    if (mapCenter && metresBetween(mapCenter, location) + radius / 1.5 <= mapRadius) return;
    mapPending = true;
    const query = "latitude=" + location.latitude.toFixed(6) + "&longitude=" + location.longitude.toFixed(6) +
      "&radius=" + radius + "&language=" + encodeURIComponent(navigator.language || "en");
    fetch("/map?" + query, { headers: { Accept: "application/json" } })
      .then((response) => response.ok ? response.json() : Promise.reject(response.status))
      .then((reply) => {
        mapCenter = { latitude: location.latitude, longitude: location.longitude };
        mapRadius = radius;
        drawMap(reply.features || []);
        map.getContainer().dataset.features = String((reply.features || []).length);
        if (reply.unavailable) map.getContainer().dataset.mapUnavailable = reply.unavailable;
      })
      .catch(() => { /* placed unreachable: the banner says so; the next move asks again */ })
      .finally(() => { mapPending = false; });
  }

  function drawMap(features) {
    const ordered = features.slice().sort((a, b) =>
      KIND_ORDER.indexOf(a.properties.kind) - KIND_ORDER.indexOf(b.properties.kind));
    if (mapLayer) mapLayer.remove();
    mapLayer = L.geoJSON(ordered, {
      renderer: mapRenderer,
      interactive: false,
      style: (feature) => KIND_STYLE[feature.properties.kind] || { color: "#999", weight: 1 },
    }).addTo(map);
    mapLayer.bringToBack();
  }

  // MARK: selecting

  function select(place, button) {
    if (button.getAttribute("aria-busy") === "true") return;
    button.setAttribute("aria-busy", "true");
    message.textContent = "";
    fetch("/select", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Placed-Token": token },
      body: JSON.stringify({ id: place.id }),
    })
      .then((response) => response.json().then((body) => ({ response, body })))
      .then(({ response, body }) => {
        if (response.ok) {
          state.marker = body.marker;
          renderMarker();
          renderList();
        } else if (body.error === "bad-token") {
          message.textContent = "This page is out of date; reloading…";
          setTimeout(() => location.reload(), 1000);
        } else {
          message.textContent = body.message || "Could not select " + place.name;
        }
      })
      .catch(() => { message.textContent = "Could not reach the kiosk server."; })
      .finally(() => button.removeAttribute("aria-busy"));
  }

  // MARK: live events

  let events = null;
  function follow() {
    events = new EventSource("/events");
    events.addEventListener("state", (event) => {
      gatewayDown = false;
      render(JSON.parse(event.data));
    });
    events.addEventListener("open", () => {
      gatewayDown = false;
      if (state) renderBanner();
    });
    events.addEventListener("error", () => {
      gatewayDown = true;
      renderBanner();
      if (events.readyState === EventSource.CLOSED) {
        // Refused (too many pages, say): the browser gives up, so try again ourselves.
        events.close();
        setTimeout(follow, 5000);
      }
    });
  }
  follow();
})();
