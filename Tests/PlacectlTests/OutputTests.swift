import PlacectlKit
import PlacedCore
import PlacedJSON
import Testing

private let forum: JSON = [
    "id": "osm:way/289767497", "name": "Forum", "kind": "shop=mall", "latitude": 60.169283, "longitude": 24.938127,
    "distance": 25.07, "likelihood": 0.438, "attribution": "© OpenStreetMap contributors",
]
private let cafe: JSON = [
    "id": "osm:node/1381017836", "name": "Robert's Coffee", "kind": "amenity=cafe", "latitude": 60.1698,
    "longitude": 24.9391, "distance": 1234.4, "likelihood": 0.0291, "attribution": "© OpenStreetMap contributors",
]
private let location: JSON = [
    "latitude": 60.1699, "longitude": 24.9384, "accuracy": 10, "mode": "2d", "age": 3.24,
]
private let marker: JSON = [
    "place": forum, "location": location, "time": "2026-11-29T12:08:46.123Z", "generation": 4, "selection": 7,
]

@Suite struct OutputTests {
    /// `details`: the open state in words first, then one aligned line per key in the interface's order;
    /// lists joined, intervals as spans, objects as key=value.
    @Test func detailsListTheKeysWithTheHoursInWords() throws {
        let text =
            #"{"place":{"id":"osm:node/1","name":"Kahvila","open_now":true,"next_change":"2026-12-07T18:00:00+02:00","#
            + #""intervals":[{"start":"08:00","end":"12:00","state":"open"},"#
            + #"{"start":"13:00","end":"18:00","state":"unknown"}],"#
            + #""phone":["+358 1","+358 2"],"diet":{"vegan":"yes","halal":"no"},"likelihood":0.25}}"#
        let reply = try #require(try JSON(parsing: Array(text.utf8)).object)
        let lines = [
            "open now, closes at 18:00 on 2026-12-07",
            "id           osm:node/1",
            "name         Kahvila",
            "likelihood   25.0%",
            "open_now     yes",
            "next_change  2026-12-07T18:00:00+02:00",
            "intervals    08:00-12:00, 13:00-18:00 (maybe)",
            "phone        +358 1, +358 2",
            "diet         halal=no, vegan=yes",
        ]
        #expect(Format.details(reply) == lines.joined(separator: "\n") + "\n")
        #expect(
            Format.details(reply, fields: ["phone", "id"])
                == "open now, closes at 18:00 on 2026-12-07\nphone  +358 1, +358 2\nid     osm:node/1\n")
        #expect(fieldList(" id , open_now,,phone ") == ["id", "open_now", "phone"])
        #expect(fieldList(nil) == nil && fieldList("") == [])
    }

    @Test func placesTableAlignsColumns() {
        let table = Format.placesTable([PlaceRecord(forum), PlaceRecord(cafe)])
        #expect(
            table == """
                #  LIKELY  DISTANCE  NAME             KIND          ID
                1   43.8%      25 m  Forum            shop=mall     osm:way/289767497
                2    2.9%   1,234 m  Robert's Coffee  amenity=cafe  osm:node/1381017836

                """)
    }

    @Test func wideCharactersTakeTwoColumns() {
        var table = TextTable(["A", "B"])
        table.add(["東京", "x"])
        table.add(["abc", "y"])
        #expect(table.rendered == "A     B\n東京  x\nabc   y\n")
    }

    @Test func currentNamesTheRankingAndItsStaleness() {
        let text = Format.current(["generation": 3, "stale": true, "location": location, "places": [forum]])
        let lines = text.split(separator: "\n")
        #expect(
            lines.first
                == "ranking 3 at 60.1699000,24.9384000 ±10 m (2d), 3.2 s old (stale: the position source is lost)")
        #expect(lines.count == 3)
        #expect(
            Format.current(["generation": 0, "stale": false, "places": []])
                == "no ranking yet: placed has no position\n")
        #expect(Format.current(["generation": 2, "stale": false, "places": []]) == "ranking 2\nno places near\n")
    }

    @Test func statusLinesAreAligned() {
        let text = Format.status([
            "source": "static", "location": location, "generation": 4, "stale": false, "places": 1636,
            "distance_filter": 50, "marker": marker,
        ])
        #expect(
            text == """
                source           static
                location         60.1699000,24.9384000 ±10 m (2d)
                fix age          3.2 s
                generation       4
                places           1,636 loaded
                distance filter  50 m
                marker           Forum (osm:way/289767497), selection 7 at 2026-11-29T12:08:46.123Z in ranking 4
                visit            none open

                """)
        let empty = Format.status(["source": "connecting", "generation": 0, "stale": false])
        #expect(empty.contains("location    none yet\n"))
        #expect(empty.contains("marker      none yet\n"))
        #expect(!empty.contains("places"), "a count the reply lacks (D-Bus) is left out")
        let visiting = Format.status([
            "source": "fix", "generation": 5, "stale": false,
            "visit": [
                "id": 12, "started": "2026-12-01T08:00:00.000Z", "duration": 200, "latitude": 60.1699,
                "longitude": 24.9384, "accuracy": 4, "fixes": 190, "place": forum,
            ],
        ])
        #expect(
            visiting.contains(
                "visit       12 since 2026-12-01T08:00:00.000Z (3 min) at 60.1699000,24.9384000 ±4 m, likely Forum"),
            "\(visiting)")
    }

    @Test func statusShowsTheFleetExportWhenItIsConfigured() {
        let connected = Format.status([
            "source": "fix", "generation": 5, "stale": false,
            "fleet": [
                "state": "connected", "broker": "mqtts://broker.example:8883", "device": "van-17", "backlog": 0,
                "inFlight": 0, "acknowledged": 1234, "dropped": 0, "rejected": 0,
            ],
        ])
        #expect(connected.contains("fleet       connected to mqtts://broker.example:8883 as van-17, backlog 0\n"))
        let failing = Format.describeFleet([
            "state": "backoff", "broker": "mqtt://10.0.0.5:1883", "device": "van-17", "backlog": 4012,
            "dropped": 3, "rejected": 1, "lastError": "mqtt://10.0.0.5:1883: Connection refused",
        ])
        #expect(
            failing
                == "backoff (mqtt://10.0.0.5:1883) as van-17, backlog 4,012, 3 dropped, 1 refused by the broker; "
                + "last error: mqtt://10.0.0.5:1883: Connection refused")
        #expect(!Format.status(["source": "fix", "generation": 5]).contains("fleet"), "off: no line")
    }

    @Test func watchShowsVisitsStartingAndEnding() {
        let ended = Format.watchUpdate(
            [
                "visit": [
                    "id": 12, "started": "2026-12-01T08:00:00.000Z", "ended": "2026-12-01T08:14:00.000Z",
                    "duration": 840, "latitude": 60.1699, "longitude": 24.9384, "accuracy": 4, "fixes": 800,
                    "place": forum, "selection": 9, "automatic": true,
                ]
            ], clock: "08:14:30")
        #expect(ended == "08:14:30  visit 12 ended after 14 min at Forum (selected automatically)\n")
    }

    @Test func historyRows() {
        let text = Format.history(["markers": [marker]])
        #expect(
            text == """
                SELECTION  TIME                      NAME   KIND       ID                 RANKING
                        7  2026-11-29T12:08:46.123Z  Forum  shop=mall  osm:way/289767497        4

                """)
        #expect(Format.history(["markers": []]) == "no selections yet\n")
    }

    @Test func watchLines() {
        let ranking = Format.watchUpdate(
            ["generation": 5, "stale": false, "location": location, "places": [forum, cafe, forum, cafe]],
            clock: "12:00:00")
        #expect(
            ranking
                == "12:00:00  ranking 5 at 60.1699000,24.9384000 ±10 m (2d): Forum 43.8%, Robert's Coffee 2.9%, Forum 43.8%, +1 more\n"
        )
        let placed = Format.watchUpdate(["generation": 5, "stale": false, "marker": marker], clock: "12:00:01")
        #expect(
            placed
                == "12:00:01  marker Forum (osm:way/289767497), selection 7 at 2026-11-29T12:08:46.123Z in ranking 4\n")
        let stale = Format.watchUpdate(["generation": 5, "stale": true, "location": location], clock: "12:00:02")
        #expect(stale == "12:00:02  ranking 5 is stale: the position source is lost\n")
        let both = Format.watchUpdate(["generation": 1, "places": [], "marker": marker], clock: "t")
        #expect(both.split(separator: "\n").count == 2)
    }

    @Test func selectedSaysWhat() {
        #expect(
            Format.selected(["marker": marker])
                == "selected Forum (osm:way/289767497), selection 7 at 2026-11-29T12:08:46.123Z in ranking 4\n")
    }

    @Test func numbers() {
        #expect(Format.percent(0.4213) == "42.1%")
        #expect(Format.percent(.nan) == "?")
        #expect(Format.metres(1234.4) == "1,234 m")
        #expect(Format.duration(3.24) == "3.2 s")
        #expect(Format.duration(42) == "42 s")
        #expect(Format.duration(75) == "1 min 15 s")
        #expect(Format.duration(7300) == "2 h 1 min")
    }

    @Test func recordsTolerateMissingFields() {
        let place = PlaceRecord(["id": "x"])
        #expect(place.name == "")
        #expect(place.likelihood.isNaN)
        #expect(LocationRecord(.null) == nil)
        #expect(LocationRecord(["latitude": 1]) == nil)
        #expect(MarkerRecord(["time": "t"]) == nil, "a marker needs its place")
    }
}
