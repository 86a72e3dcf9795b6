// KOpeningHours as an oracle for test_opening_hours.py: reads "value<TAB>instant<TAB>lat<TAB>lon"
// lines (instant in RFC 3339 with offset), evaluates each in Europe/Helsinki with Finland's holidays
// (KHolidays, region "FI"), and prints open|closed|unknown, or "error<TAB>name" when KOpeningHours
// cannot parse or evaluate the value.
#include <KOpeningHours/Interval>
#include <KOpeningHours/OpeningHours>

#include <QDateTime>
#include <QHash>
#include <QTimeZone>

#include <iostream>
#include <string>

int main()
{
    const QTimeZone zone("Europe/Helsinki");
    QHash<QByteArray, KOpeningHours::OpeningHours> parsed;
    std::string line;
    while (std::getline(std::cin, line)) {
        const QList<QByteArray> fields = QByteArray::fromStdString(line).split('\t');
        if (fields.size() != 4) {
            std::cout << "error\tbad input line\n";
            continue;
        }
        auto it = parsed.find(fields[0]);
        if (it == parsed.end()) {
            KOpeningHours::OpeningHours hours(fields[0]);
            hours.setLocation(fields[2].toFloat(), fields[3].toFloat());
            hours.setRegion(u"FI");
            hours.setTimeZone(zone);
            it = parsed.insert(fields[0], hours);
        }
        const auto instant = QDateTime::fromString(QString::fromLatin1(fields[1]), Qt::ISODate).toTimeZone(zone);
        if (it->error() != KOpeningHours::OpeningHours::NoError) {
            std::cout << "error\t" << int(it->error()) << "\n";
            continue;
        }
        const auto interval = it->interval(instant);
        if (it->error() != KOpeningHours::OpeningHours::NoError || !interval.isValid()) {
            std::cout << "error\tevaluation " << int(it->error()) << "\n";
            continue;
        }
        switch (interval.state()) {
        case KOpeningHours::Interval::Open: std::cout << "open\n"; break;
        case KOpeningHours::Interval::Closed: std::cout << "closed\n"; break;
        default: std::cout << "unknown\n"; break;
        }
    }
}
